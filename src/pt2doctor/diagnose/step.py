"""How `diagnose` runs its steps: a tuple of named functions, and one short loop.

Contract: a step is a function `(ctx, found, **earlier) -> result`. `ctx` is what every step may use and
none changes (`Context`: the options, the runner of script variants, the reporters); `found` is the
verdict so far (`diagnose.found`), where a step writes what the report says (notes, the headline of a
conclusion). Its other parameters are earlier steps' results, named as those steps are: the loop passes
each from the results so far, and skips the step when one of them is missing or None (what it needs
was not established), or when its `when` (called the same way) says it does not apply. What a step
returns is its own typed result, handed to the steps after it by its name; `STOP` ends the procedure:
the step concluded (`found` holds the conclusion).

`run_steps` times each step into `found.timings` (under its name), says its `status` as progress
before it starts, and closes every result that holds something running (`close()`: a bisector warming
up, a control in the background) when the procedure ends, however it ends; a Ctrl-C propagates to
`diagnose`, which keeps what was found. pyinstrument's processors and `reduce.fx_passes.FX_PASSES` are
declared the same way.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pt2doctor.capture.runner import Reporter
    from pt2doctor.diagnose.found import Found
    from pt2doctor.diagnose.options import DiagnoseOptions
    from pt2doctor.diagnose.runs import VariantRunner


@dataclass(frozen=True)
class Context:
    """What every step may use and no step changes."""

    options: DiagnoseOptions
    runner: VariantRunner
    reporter: Reporter
    minify_reporter: Any = None  # the minifier's own progress (a `reduce` reporter), or None


class _Stop:
    def __repr__(self) -> str:
        return "STOP"


STOP: Any = _Stop()  # a step's result that concludes the procedure


def _always(ctx: Context, found: Found) -> bool:
    return True


@dataclass(frozen=True)
class Step:
    """One named step: `run(ctx, found, **earlier results)`, when `when(ctx, found, **its earlier results)`;
    `status` is said before it starts ("" when the step says its own, or only when it has something to do)."""

    name: str
    run: Callable[..., Any]
    status: str = ""
    when: Callable[..., bool] = _always

    def wants(self) -> tuple[str, ...]:
        """The earlier results it takes: the parameters after `ctx` and `found` of `run` and of `when`."""
        return tuple(dict.fromkeys((*_parameters(self.run), *_parameters(self.when))))


def _parameters(fn: Callable[..., Any]) -> tuple[str, ...]:
    return tuple(inspect.signature(fn).parameters)[2:]


def run_steps(steps: Sequence[Step], ctx: Context, found: Found) -> dict[str, Any]:
    """Run `steps` in order (see the module's contract); the results by step name."""
    names = [s.name for s in steps]
    assert len(set(names)) == len(names), f"two steps share a name: {names}"
    results: dict[str, Any] = {}
    try:
        for step in steps:
            unknown = [w for w in step.wants() if w not in names[:names.index(step.name)]]
            assert not unknown, f"step {step.name} takes {unknown}, which no step before it returns"
            earlier = {w: results.get(w) for w in step.wants()}
            if any(value is None for value in earlier.values()) or not _call(step.when, ctx, found, earlier):
                continue
            if step.status:
                ctx.reporter.status(step.status)
            with found.timed(step.name):
                result = _call(step.run, ctx, found, earlier)
            if result is STOP:
                break
            results[step.name] = result
    finally:
        for result in results.values():
            if callable(getattr(result, "close", None)):
                result.close()
    return results


def _call(fn: Callable[..., Any], ctx: Context, found: Found, earlier: dict[str, Any]) -> Any:
    return fn(ctx, found, **{name: earlier[name] for name in _parameters(fn)})

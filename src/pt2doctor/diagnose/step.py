"""How `diagnose` runs its steps: a tuple of named functions, and one short loop.

Contract: a step is a function `(ctx, found, **earlier) -> result`. `ctx` is what every step may use and
none changes (`Context`: the options, the runner of script variants, the reporters). Its other parameters
are earlier steps' results, named as those steps are: the loop passes each from the results so far, and
skips the step when one of them is missing or None (what it needs was not established), or when its
`when` (called the same way) says it does not apply; a parameter with a default is a result the step reads
where there is one (None where that step did not run or found nothing), and does not hold the step back.
What a step returns is its own typed result, handed to the steps after it by its name; `STOP` ends the
procedure: the step concluded (`Concluded(result)`: concluded, with a result kept as any other).
`found` is the verdict so far (`diagnose.found`): a step reads all of it and sets only the fields its
`Step.writes` names (what the report says it established: the category, the stage, notes, next steps);
it gets a `StepView` of it in which, under `PT2DOCTOR_STRICT` (the test suite), every other field is
read-only (setting one, or changing a list or dict of one, raises `UndeclaredWrite`), so the tuple of steps
says what each step writes, and the tests hold each step to it.

`run_steps` times each step into `found.timings` (under its name), says its `status` as progress
before it starts, calls `ctx.after_step` with its name once it ran (the verdict is said and written as soon as it is
known, `diagnose.procedure`), and closes every result that holds something running (`close()`: a bisector warming
up, a control in the background) when the procedure ends, however it ends; a Ctrl-C propagates to
`diagnose`, which keeps what was found; so does a stop that a step kept its best on or met as an error (the
runner closed by the stop: no step runs after it). A step that raises (pt2doctor's own error, never the script's:
the steps catch what the runs do) is kept in `found.internal_errors` and the procedure goes on without
its result, so what the other steps found is still written and the exit status says an internal error
happened; with `PT2DOCTOR_STRICT` set (the test suite) it propagates instead. pyinstrument's processors
and `reduce.fx_passes.FX_PASSES` are declared the same way.
"""

from __future__ import annotations

import dataclasses
import inspect
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from pt2doctor.model.settings import settings

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
    # called with a step's name once it ran (the verdict so far is said and written as it is known)
    after_step: Callable[[str], None] | None = None
    started: float = 0.0  # time.monotonic() when the diagnosis started: its budget counts from then

    def remaining_s(self) -> float | None:
        """The seconds left of the diagnosis's `--budget` (None: no budget)."""
        budget = self.options.budget_s if self.options is not None else None
        return None if budget is None else budget - (time.monotonic() - self.started)

    def reduction_s(self) -> float | None:
        """What a reduction (the minifier, the program reducer) may take of the budget: half of what is left, so that
        verifying what it found and the rest of the hand-over fit in the other half (None: no budget)."""
        left = self.remaining_s()
        return None if left is None else max(1.0, left / 2)


class _Stop:
    def __repr__(self) -> str:
        return "STOP"


STOP: Any = _Stop()  # a step's result that concludes the procedure


@dataclass(frozen=True)
class Concluded:
    """A step's result that concludes the procedure and is kept under the step's name, as any other."""

    result: Any


def _always(ctx: Context, found: Found) -> bool:
    return True


@dataclass(frozen=True)
class Step:
    """One named step: `run(ctx, found, **earlier results)`, when `when(ctx, found, **its earlier results)`;
    `status` is said before it starts ("" when the step says its own, or only when it has something to do);
    `writes`: the fields of the verdict (`Found`) it sets, space-separated."""

    name: str
    run: Callable[..., Any]
    status: str = ""
    when: Callable[..., bool] = _always
    writes: str = ""

    def fields(self) -> frozenset[str]:
        return frozenset(self.writes.split())

    def wants(self) -> tuple[str, ...]:
        """The earlier results it takes: the parameters after `ctx` and `found` of `run` and of `when`."""
        return tuple(dict.fromkeys((*_parameters(self.run), *_parameters(self.when))))

    def needs(self) -> tuple[str, ...]:
        """The earlier results without which it does not run: those of `wants` that have no default."""
        return tuple(dict.fromkeys((*_parameters(self.run, needed=True), *_parameters(self.when, needed=True))))


def _parameters(fn: Callable[..., Any], needed: bool = False) -> tuple[str, ...]:
    taken = list(inspect.signature(fn).parameters.values())[2:]
    return tuple(p.name for p in taken if not needed or p.default is inspect.Parameter.empty)


def run_steps(steps: Sequence[Step], ctx: Context, found: Found, results: dict[str, Any] | None = None
              ) -> dict[str, Any]:
    """Run `steps` in order (see the module's contract); the results by step name, in `results` when given (so
    a caller keeps those of the steps that ended, however the procedure ends, and can run the procedure again from
    a later step with the results of the steps before it)."""
    names = [s.name for s in steps]
    assert len(set(names)) == len(names), f"two steps share a name: {names}"
    verdict = {f.name for f in dataclasses.fields(found)}
    results = {} if results is None else results
    try:
        for step in steps:
            _unless_stopped(ctx)
            unknown = [w for w in step.wants() if w not in names[:names.index(step.name)] and w not in results]
            assert not unknown, f"step {step.name} takes {unknown}, which no step before it returns"
            assert step.fields() <= verdict, f"step {step.name} writes {step.fields() - verdict}, not the verdict's"
            earlier = {w: results.get(w) for w in step.wants()}
            if any(earlier[w] is None for w in step.needs()) or not _call(step.when, ctx, StepView(found), earlier):
                continue
            if step.status:
                ctx.reporter.status(step.status)
            try:
                with found.timed(step.name), _counted_for(ctx, step.name):
                    result = _call(step.run, ctx, StepView(found, step), earlier)
            except Exception as exc:
                _unless_stopped(ctx, exc)
                if settings().strict:
                    raise
                found.internal_errors.append(f"step {step.name!r}: {type(exc).__name__}: {exc}")
                continue
            concluded = result is STOP or isinstance(result, Concluded)
            if result is not STOP:
                results[step.name] = result.result if isinstance(result, Concluded) else result
            if ctx.after_step is not None:
                ctx.after_step(step.name)
            if concluded:
                break
    finally:
        for result in results.values():
            if callable(getattr(result, "close", None)):
                result.close()
    return results


def _unless_stopped(ctx: Context, cause: Exception | None = None) -> None:
    """The diagnosis was stopped (the stop's handler closed the runner, `diagnose.stopping`) while a step went on: it
    kept its best on the stop, or met the closed runner (a run submitted in a `finally`). The stop goes on to
    `diagnose`; what the step met is the stop's doing, not an error of ours."""
    if ctx.runner is not None and ctx.runner.closed:
        raise KeyboardInterrupt("the diagnosis was stopped") from cause


def _counted_for(ctx: Context, name: str) -> AbstractContextManager[None]:
    """The runs the step makes are counted for it (`Attempt.step`)."""
    return ctx.runner.step(name) if ctx.runner is not None else nullcontext()


def _call(fn: Callable[..., Any], ctx: Context, found: StepView, earlier: dict[str, Any]) -> Any:
    return fn(ctx, found, **{name: earlier[name] for name in _parameters(fn)})


class UndeclaredWrite(AttributeError):
    """A step set a field of the verdict that its `Step.writes` does not name."""


class StepView:
    """`found` as one step sees it (see the module's contract); a step's `when` sees it read-only. Checked only
    under `PT2DOCTOR_STRICT` (the tests): for a user, a step's slip in its declaration must cost nothing, so
    the view then passes every read and write through."""

    __slots__ = ("_found", "_step", "_writes", "_strict")

    def __init__(self, found: Found, step: Step | None = None) -> None:
        object.__setattr__(self, "_found", found)
        object.__setattr__(self, "_step", step.name if step else "a step's `when`")
        object.__setattr__(self, "_writes", step.fields() if step else frozenset())
        object.__setattr__(self, "_strict", settings().strict)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._found, name)
        if name in self._writes or not self._strict:
            return value
        if isinstance(value, list):
            return tuple(value)
        if isinstance(value, dict):
            return MappingProxyType(value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._writes and self._strict:
            raise UndeclaredWrite(f"step {self._step} sets found.{name}, which its Step(writes=...) does not name")
        setattr(self._found, name, value)

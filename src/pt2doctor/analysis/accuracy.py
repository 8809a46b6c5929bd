"""What the per-graph accuracy results mean: known non-bugs, explained differences, the exit code.

Contract: pure functions over `GraphAccuracy` values (no torch, no I/O).
- `needs_rng_recheck(results)`: a graph Inductor compiled failed and has ops that draw, so a re-run
  with `FALLBACK_RANDOM` (Inductor then calls eager's RNG ops) tells an RNG difference from a bug.
  The config is Inductor's: under any other backend it changes nothing, so there is no re-run.
- `explain(results, recheck)`: name the causes (random ops, reduced precision, nondeterminism) and
  mark a failure `explained` only when the evidence says so: it passes under fallback_random, or
  the compiled graph differs from itself about as much as from eager. Random ops are a cause only of
  a failure (a graph that passes drew alike). Reduced precision is called out but never excuses a
  failure: PyTorch's rule already allows bf16/fp16 a 3x larger RMSE.
- `headline(results)`: one line; `analysis.verdict` makes a graph failing without explanation the
  run's verdict (category `accuracy`, exit code `ExitCode.MISMATCH`) unless the script itself failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pt2doctor.model.accuracy import GraphAccuracy, NonBugCause, Recheck
from pt2doctor.model.session import Compile

FALLBACK_RANDOM: dict[str, Any] = {"inductor_config": {"fallback_random": True}}
FALLBACK_RANDOM_LINE = "torch._inductor.config.fallback_random = True"
_NOISE_SHARE = 0.5  # run-to-run difference at least half the compiled-vs-eager one: noise, not a bug


def needs_rng_recheck(results: Sequence[GraphAccuracy]) -> bool:
    return any(_rng_may_explain(r) for r in results)


def _rng_may_explain(result: GraphAccuracy) -> bool:
    return result.verdict == "fail" and bool(result.random_ops) and result.inductor


def explain(results: Sequence[GraphAccuracy], recheck: Sequence[GraphAccuracy] = ()) -> list[GraphAccuracy]:
    again = {r.graph: r for r in recheck}
    return [explain_one(r, again.get(r.graph) if _rng_may_explain(r) else None) for r in results]


def explain_one(result: GraphAccuracy, again: GraphAccuracy | None) -> GraphAccuracy:
    failed = result.verdict == "fail"
    causes = [c for c, present in ((NonBugCause.RANDOM, failed and bool(result.random_ops)),
                                   (NonBugCause.REDUCED_PRECISION, bool(result.reduced_precision)),
                                   (NonBugCause.NONDETERMINISM, result.deterministic is False)) if present]
    recheck = Recheck(FALLBACK_RANDOM, again.verdict) if again is not None else None
    noisy = (result.deterministic is False
             and (result.run_to_run_max_abs or 0.0) >= _NOISE_SHARE * (result.max_abs_err or 0.0))
    explained = failed and ((recheck is not None and recheck.verdict == "pass") or noisy)
    out = replace(result, causes=tuple(causes), recheck=recheck, explained=explained)
    if again is not None and again.verdict == "fail" and again.first_divergent is not None:
        # The bug is still there without RNG noise: that run's localization is the trustworthy one.
        out = replace(out, first_divergent=again.first_divergent, top_divergent=again.top_divergent,
                      nodes_compared=again.nodes_compared)
    return out


def with_functions(results: Sequence[GraphAccuracy], compiles: Sequence[Compile]) -> list[GraphAccuracy]:
    """Name each graph's frame (`fn (file:line)`) from the session's compiles."""
    names = {str(c.compile_id): f"{c.function} ({c.file}:{c.line})" for c in compiles}
    return [replace(r, function=r.function or names.get(r.graph)) for r in results]


def any_wrong(results: Sequence[GraphAccuracy]) -> bool:
    """A graph's compiled results are wrong, with no known non-bug to explain it: what `accuracy` fails on."""
    return any(r.real_failure for r in results)


def headline(results: Sequence[GraphAccuracy]) -> str:
    if not results:
        return "accuracy: no compiled graph ran, nothing to compare"
    real = [r for r in results if r.real_failure]
    explained = [r for r in results if r.verdict == "fail" and r.explained]
    errors = [r for r in results if r.verdict == "error"]
    parts = [f"{len(results) - len(real) - len(explained) - len(errors)} pass"]
    parts += [f"{len(real)} FAIL"] if real else []
    parts += [f"{len(explained)} differ for a known reason"] if explained else []
    parts += [f"{len(errors)} could not be checked"] if errors else []
    text = f"accuracy: {len(results)} graph(s): {', '.join(parts)}"
    first = next((r.first_divergent for r in real if r.first_divergent), None)
    if first is not None:
        where = f" at {first.file}:{first.line}" if first.file else ""
        text += f"; first divergent op {first.op}{where}"
    return text

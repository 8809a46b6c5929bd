"""Plain-text rendering of `pt2doctor accuracy` results: one block per compiled graph.

Contract: `render_accuracy(results) -> str` is pure (no printing, no colour); the CLI prints it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pt2doctor.analysis.accuracy import FALLBACK_RANDOM_LINE, headline
from pt2doctor.model.accuracy import DivergentNode, Errors, GraphAccuracy, MinifySummary, NonBugCause

_CAUSE_TEXT = {
    NonBugCause.RANDOM: "random ops in the graph ({ops}): compiled may draw different numbers from eager",
    NonBugCause.REDUCED_PRECISION: "reduced precision ({notes}): PyTorch's rule allows bf16/fp16 3x eager's error",
    NonBugCause.NONDETERMINISM: "nondeterminism: two compiled runs on the same inputs differ by up to {run_to_run}",
}


def render_accuracy(results: Sequence[GraphAccuracy]) -> str:
    lines = [headline(results), ""]
    for result in results:
        lines += _graph(result) + [""]
    return "\n".join(lines)


def verdict_word(r: GraphAccuracy) -> str:
    return "FAIL" if r.real_failure else "fail (known non-bug)" if r.verdict == "fail" else r.verdict.upper()


def _graph(r: GraphAccuracy) -> list[str]:
    lines = [f"[{r.graph}] {r.function or ''}  {verdict_word(r)}".rstrip()]
    if r.error:
        lines.append(f"  probe error: {r.error}")
    for label, errors in (("forward", r.forward), ("backward", r.backward)):
        if errors is not None:
            lines.append(f"  {label + ':':9} {_errors(errors)}")
    lines += _reference(r)
    if r.first_divergent is not None:
        lines.append(f"  first divergent node ({r.nodes_compared} intermediates compared, one instrumented run):")
        lines.append(f"    {_node(r.first_divergent)}")
        if r.first_divergent.code:
            lines.append(f"      {r.first_divergent.code}")
    elif r.verdict == "fail":
        lines.append("  no intermediate of the forward graph diverges on its own (backward-only, or fused away)")
    if len(r.top_divergent) > 1:
        lines.append("  top divergent nodes by max abs error:")
        lines += [f"    {_node(n)}" for n in r.top_divergent]
    lines += [f"  note: {_cause(r, c)}" for c in r.causes]
    if NonBugCause.RANDOM in r.causes and r.inductor:
        lines.append(f"        set {FALLBACK_RANDOM_LINE} to make compiled draw like eager")
    if r.recheck is not None:
        lines.append(f"  re-checked with {FALLBACK_RANDOM_LINE}: {r.recheck.verdict}")
        if r.recheck.verdict == "pass":
            lines.append("        the difference is RNG, not a compiler bug")
    if r.minified:
        lines.append(f"  minified: {_minified(r.minified)}")
    return lines


def _reference(r: GraphAccuracy) -> list[str]:
    if r.fp64_unavailable:
        return [f"  fp64 reference unavailable: {r.fp64_unavailable}",
                "        judged against eager alone (allclose within the tolerance), as same_two_models does"]
    if r.reference_equals_eager:
        return ["  note: the fp64 reference equals eager exactly: it carries no information about this",
                "        graph's rounding (the values are computed in float32 in the fp64 run too)"]
    return []


def _errors(e: Errors) -> str:
    return (f"{e.verdict}  max abs {_num(e.max_abs_err)}  max rel {_num(e.max_rel_err)}  RMSE ratio "
            f"{_num(e.rmse_ratio)} (to fp64: compiled {_num(e.rmse_compiled)}, eager {_num(e.rmse_eager)})")


def _node(n: DivergentNode) -> str:
    where = f"{Path(n.file).name}:{n.line}" if n.file else "(no source line)"
    shape = f"{n.dtype}[{', '.join(map(str, n.shape))}]"
    return f"{n.op:28} {n.node:12} {shape:20} {where:24} max abs err {_num(n.max_abs_err)}"


def _cause(r: GraphAccuracy, cause: NonBugCause) -> str:
    return _CAUSE_TEXT[cause].format(ops=", ".join(r.random_ops), notes=", ".join(r.reduced_precision),
                                     run_to_run=_num(r.run_to_run_max_abs))


def _minified(m: MinifySummary) -> str:
    if m.error:
        return f"not minified: {m.error}"
    word = "minimal, verified" if m.minimal else "verified" if m.verified else "NOT verified"
    return (f"{m.nodes_before} -> {m.nodes_after} nodes {list(m.ops or ())} in {m.time_s} s; "
            f"repro ({word}): {m.repro}")


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g}"

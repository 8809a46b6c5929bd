"""The accuracy section of the HTML report, as data: `accuracy_section(results)` -> a JSON-like dict.

Contract: pure; the dict is drawn by the generic blocks (`html_data.blocks_for`): one table with a
row per compiled graph, then, per failing graph, a table of its divergent nodes (first divergent
marked). Strings stay raw: the template escapes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pt2doctor.analysis.accuracy import headline
from pt2doctor.model.accuracy import DivergentNode, GraphAccuracy
from pt2doctor.report.accuracy import verdict_word


def accuracy_section(results: Sequence[GraphAccuracy]) -> dict[str, Any]:
    section: dict[str, Any] = {"summary": headline(results), "graphs": [_row(r) for r in results]}
    for r in results:
        if r.top_divergent or r.first_divergent:
            nodes = [r.first_divergent] if r.first_divergent else []
            nodes += [n for n in r.top_divergent if n != r.first_divergent]
            section[f"divergent nodes of [{r.graph}]"] = [_node(n, n is r.first_divergent) for n in nodes]
    return section


def _row(r: GraphAccuracy) -> dict[str, Any]:
    first = r.first_divergent
    minified = r.minified
    return {
        "graph": r.graph, "function": r.function, "verdict": verdict_word(r),
        "max abs err": r.max_abs_err, "RMSE ratio": r.rmse_ratio,
        "backward": r.backward.verdict if r.backward else "not computed",
        "fp64 reference": _reference(r),
        "first divergent": f"{first.op} at {first.file}:{first.line}" if first else None,
        "known causes": ", ".join(c.value for c in r.causes) or None,
        "fallback_random re-check": r.recheck.verdict if r.recheck else None,
        "minified repro": (minified.error or minified.repro) if minified else None,
        "repro verified": minified.verified if minified else None,
    }


def _reference(r: GraphAccuracy) -> str | None:
    if r.fp64_unavailable:
        return f"unavailable: {r.fp64_unavailable}"
    return "equals eager exactly (no information about rounding)" if r.reference_equals_eager else None


def _node(n: DivergentNode, first: bool) -> dict[str, Any]:
    return {"first": first, "node": n.node, "op": n.op, "dtype": n.dtype, "shape": list(n.shape),
            "source": f"{n.file}:{n.line}" if n.file else None, "code": n.code,
            "max abs err": n.max_abs_err, "RMSE ratio": n.rmse_ratio}

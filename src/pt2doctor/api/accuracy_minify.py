"""Minify the graph the accuracy probe found failing, with the accuracy check, and verify the repro.

Contract: `minify_graph(run_dir, compile_id, tolerance, jobs, timeout_s, reporter)` loads, from what
the graph recorder wrote in a run with `record_graphs` (`RunPaths(run_dir).graphs_dir`), the Dynamo
graph of that compile id, or with Inductor its forward/inference AOT graph (where Inductor's own bugs live), and reduces it with
`reduce.fx_minify.minify_case` in accuracy mode: the repro's fp64-referenced check is the rule the
probe judged with. Returns a JSON-able summary for `GraphAccuracy.minified`; a graph that cannot be
minified gives `{"error": ...}` instead of raising, so the accuracy report is still written.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from pt2doctor.capture.process_meta import RunPaths
from pt2doctor.capture.runner import Reporter


class MinifyStatus:
    """The reducer's progress as one status line per pass, through the run's reporter."""

    def __init__(self, reporter: Reporter) -> None:
        self.reporter = reporter
        self.last = ""

    def progress(self, pass_name: str, size: int, queries: int, cache_hits: int) -> None:
        if pass_name != self.last:
            self.last = pass_name
            self.reporter.status(f"minify: {pass_name}, {size} nodes left, {queries} queries")


def minify_graph(run_dir: Path, compile_id: str, tolerance: float, jobs: int, timeout_s: float,
                 reporter: Reporter) -> dict[str, Any]:
    from pt2doctor.reduce.fx_load import NothingToMinify, _blame_aot, case_from_entry, context_from_entry
    from pt2doctor.reduce.fx_minify import CannotReproduce, MinifyOptions, minify_case

    started = time.monotonic()
    graphs = RunPaths(Path(run_dir)).graphs_dir
    try:
        entries = _recorded(graphs)
        dynamo = next((e for e in entries.values() if e["stage"] == "dynamo" and e.get("compile_id") == compile_id), None)
        if dynamo is None:
            raise NothingToMinify(f"no recorded graph for compile id {compile_id}")
        entry = entries[_blame_aot(entries, dynamo["id"])]  # the fx_load rule: Inductor's AOT graph
        out = Path(run_dir) / f"minify-{entry['id']}"
        options = MinifyOptions(out, jobs, timeout_s, graph_name=entry["id"])
        outcome = minify_case(case_from_entry(graphs, entry), context_from_entry(entry, True, tolerance), options,
                              MinifyStatus(reporter))
    except (NothingToMinify, CannotReproduce, OSError, ValueError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}", "time_s": round(time.monotonic() - started, 1)}
    result = outcome.result
    return {"graph": result.graph, "stage": result.stage.value, "nodes_before": result.nodes_before,
            "nodes_after": result.nodes_after, "ops": list(result.ops), "verified": result.verified,
            "minimal": result.minimal, "repro": result.repro_path, "queries": result.queries,
            "time_s": round(time.monotonic() - started, 1)}


def _recorded(graphs: Path) -> dict[str, dict[str, Any]]:
    index = graphs / "index.jsonl"
    if not index.exists():
        from pt2doctor.reduce.fx_load import NothingToMinify

        raise NothingToMinify(f"no recorded graphs under {graphs}")
    entries = [json.loads(line) for line in index.read_text().splitlines() if line.strip()]
    return {e["id"]: e for e in entries}

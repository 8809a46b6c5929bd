"""Minify the graph the accuracy probe found failing, with the accuracy check, and verify the repro.

Contract: `minify_graph(run_dir, compile_id, tolerance, jobs, timeout_s, reporter)` loads, from what
the graph recorder wrote in a run with `record_graphs`, the graph to minify for that compile id with
`reduce.fx_load.load_compile` (the Dynamo graph, or with Inductor its forward/inference AOT graph,
where Inductor's own bugs live), and reduces it with `reduce.fx_minify.minify_case` in accuracy mode:
the repro's fp64-referenced check is the rule the probe judged with. The input values the recorder
kept (the blamed graph's inputs at the call the probe judged, see `capture.child.graph_recorder`; integer
ones of any graph) are saved beside the repro in `RUN_DIR/minify-<compile id>/repro_inputs.pt`, as
`pt2doctor minify RUN_DIR` does, so a bug that shows only on the real values reproduces. Returns the
`MinifySummary` for `GraphAccuracy.minified`; a graph that cannot be minified gives one with only
`error` (and `time_s`) instead of raising, for whatever reason (one FX cannot even load),
so the accuracy report is still written and `pt2doctor accuracy` exits with its verdict, never 70.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from pt2doctor.capture.runner import Reporter
from pt2doctor.model.accuracy import MinifySummary


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
                 reporter: Reporter) -> MinifySummary:
    from pt2doctor.reduce.fx_load import load_compile
    from pt2doctor.reduce.fx_minify import MinifyOptions, minify_case

    started = time.monotonic()
    out = Path(run_dir) / f"minify-{_safe_name(compile_id)}"
    try:
        recorded = load_compile(Path(run_dir), compile_id, tolerance=tolerance, out_dir=out)
        options = MinifyOptions(out, jobs, timeout_s, graph_name=recorded.graph_id)
        outcome = minify_case(recorded.case, recorded.context, options, MinifyStatus(reporter))
    except Exception as exc:  # NothingToMinify, CannotReproduce, I/O; a graph FX cannot load (`_wrap_for_grad`)
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
        return MinifySummary(error=f"{type(exc).__name__}: {first}"[:500], time_s=round(time.monotonic() - started, 1))
    return MinifySummary.of(outcome.result, round(time.monotonic() - started, 1))


def _safe_name(compile_id: str) -> str:
    """A compile id as a directory name: `0/1` -> `0-1`, `0/1@1` -> `0-1@1` (the `@` kept: `0-1-1` would be
    `!0/1/1`'s, a compiled-autograd graph's)."""
    return re.sub(r"[^0-9A-Za-z_.@]+", "-", compile_id).strip("-") or "graph"

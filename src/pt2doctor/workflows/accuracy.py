"""`pt2doctor accuracy` as a function: run with the accuracy probe, re-check RNG, minify, return the session.

Contract: `check_accuracy(options, reporter)` runs the script once with the probe on
(the child spec's `accuracy_probe`, `capture/child/accuracy_probe.py`) and the graph recorder on; when a failing graph
has random ops it runs the script again with `fallback_random` in `<out>/recheck-fallback-random/`;
`analysis.accuracy.explain` then names the causes; finally the first graph that fails without
explanation is minified with the accuracy check (`reduce.fx_minify`, the fp64-referenced rule the
probe used) and its repro verified in a fresh interpreter. The probe hands the recorder the
inputs of each graph it judges wrong (`capture.child.graph_recorder.keep_failing_inputs`), so the repro
reads the values the probe judged (`repro_inputs.pt`) rather than random ones. The returned session
holds the results in `Session.accuracy` (one `GraphAccuracy` per compiled graph, in the order they
first ran).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path

import msgspec

from pt2doctor.analysis.accuracy import FALLBACK_RANDOM, explain, needs_rng_recheck, with_functions
from pt2doctor.capture.process_meta import RunPaths
from pt2doctor.capture.runner import Reporter, RunOptions, run_script
from pt2doctor.model import Session
from pt2doctor.model.accuracy import GraphAccuracy
from pt2doctor.model.child import AccuracyProbeSpec, Overrides
from pt2doctor.model.minify import DEFAULT_TOLERANCE
from pt2doctor.model.serialize import convert, read_lines
from pt2doctor.model.settings import default_jobs

RESULTS = "accuracy.jsonl"
RECHECK_DIR = "recheck-fallback-random"


@dataclass(frozen=True, slots=True)
class AccuracyOptions:
    run: RunOptions
    tolerance: float = DEFAULT_TOLERANCE
    backend: str | None = None
    minify: bool = True
    jobs: int = field(default_factory=default_jobs)
    minify_timeout_s: float = 120.0


def check_accuracy(options: AccuracyOptions, reporter: Reporter) -> Session:
    session = run_script(probe_options(options, options.run.out_dir, record=True), reporter)
    results = read_results(options.run.out_dir)
    recheck: list[GraphAccuracy] = []
    if needs_rng_recheck(results):
        reporter.status("a failing graph has random ops: re-checking with fallback_random=True")
        out = options.run.out_dir / RECHECK_DIR
        run_script(probe_options(options, out, record=False, overrides=convert(FALLBACK_RANDOM, Overrides)), reporter)
        recheck = read_results(out)
    results = explain(with_functions(results, session.compiles), recheck)
    if options.minify:
        results = minify_first_failure(results, options, reporter)
    return replace(session, accuracy=tuple(results))


def probe_options(options: AccuracyOptions, out_dir: Path, *, record: bool,
                  overrides: Overrides | None = None) -> RunOptions:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / RESULTS).unlink(missing_ok=True)
    if record:  # the recorder appends: graphs of an earlier run in this directory must not mix in
        shutil.rmtree(RunPaths(out_dir).graphs_dir, ignore_errors=True)
    overrides = overrides or Overrides()
    if options.backend:
        overrides = msgspec.structs.replace(overrides, compile_kwargs={"backend": options.backend})
    probe = AccuracyProbeSpec(str((out_dir / RESULTS).resolve()), options.tolerance)
    hooks = msgspec.structs.replace(options.run.hooks, accuracy_probe=probe,
                                    overrides=overrides if overrides != Overrides() else None)
    return replace(options.run, out_dir=out_dir, hooks=hooks, record_graphs=record)


def read_results(run_dir: Path) -> list[GraphAccuracy]:
    return read_lines(run_dir / RESULTS, GraphAccuracy)


def minify_first_failure(results: list[GraphAccuracy], options: AccuracyOptions,
                         reporter: Reporter) -> list[GraphAccuracy]:
    target = next((r for r in results if r.real_failure), None)
    if target is None:
        return results
    reporter.status(f"minifying graph [{target.graph}] with the accuracy check")
    from pt2doctor.workflows.accuracy_minify import minify_graph

    summary = minify_graph(options.run.out_dir, target.graph, options.tolerance, options.jobs,
                           options.minify_timeout_s, reporter)
    return [replace(r, minified=summary) if r is target else r for r in results]

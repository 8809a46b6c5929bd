"""diagnose's first steps: reproduce the failure, and say which failure is diagnosed.

Contract: `reproduce` runs the unchanged script twice, side by side: the first with the graph recorder on, each
graph's first call judged against eager (so a wrong result's graph is known from this run: `diagnose.wrong_graph`),
the second plain; it concludes (`STOP`) when both pass (nothing to diagnose) or the failure does not repeat the same
way (flaky), and otherwise returns `Reproduced`. No stage run is queued behind them: what the recording shows
decides whether the stage is found on a graph or needs runs of the program (`diagnose.narrowing.stage_evidence`).
`classify` takes the failure the first run ended with: its category (`analysis.failures`), a CUDA kernel error tied
to the compiled graph that launched it (one more run with CUDA_LAUNCH_BLOCKING=1, which then stands for the
failure), the rank of a job that failed first, and the backend and device the recording saw (`Classified`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pt2doctor.analysis.failures import asynchronous_cuda_error
from pt2doctor.capture.process_meta import RunPaths
from pt2doctor.diagnose.found import Found, flaky, success
from pt2doctor.diagnose.ranks import name_rank
from pt2doctor.diagnose.runs import Variant, VariantRunner
from pt2doctor.diagnose.step import STOP, Context
from pt2doctor.model import Category
from pt2doctor.model.diagnosis import Attempt
from pt2doctor.model.minify import DEFAULT_TOLERANCE, BackendSpec
from pt2doctor.model.recording import read_failures, read_index
from pt2doctor.model.serialize import RecordError


@dataclass(frozen=True)
class Reproduced:
    """The failure, seen twice: `first` (recorded), `second` (plain, or the same label when only the plain
    runs are diagnosed)."""

    first: Attempt
    second: Attempt


@dataclass(frozen=True)
class Classified:
    """The failure diagnosed from here on: `attempt`, the run that stands for it (its recording is minified,
    its frames say where), the backend its failing graph was compiled with, and whether any recorded graph
    ran on a CUDA device."""

    attempt: Attempt
    backend: BackendSpec | None
    on_cuda: bool


def reproduce(ctx: Context, found: Found) -> Reproduced:
    runner = ctx.runner
    first = runner.submit(Variant.original(1, record=True, accuracy_tolerance=DEFAULT_TOLERANCE))
    second = runner.submit(Variant.original(2))
    a1, a2 = first.result(), second.result()
    found.attempts += [a1, a2]
    found.session = runner.sessions.get(a1.label)
    if a1.outcome == "pass" and a2.outcome == "pass":
        success(found)
        return STOP
    if a1.signature != a2.signature:
        plain = _unless_recording_changed_it(runner, found, a1, a2)
        if plain is None:  # flaky
            return STOP
        if plain.outcome == "pass":
            success(found)
            return STOP
        return Reproduced(plain, a2)
    return Reproduced(a1, a2)


def classify(ctx: Context, found: Found, reproduce: Reproduced) -> Classified:
    a1, a2 = reproduce.first, reproduce.second
    found.category, found.error = a1.category or Category.UNCLASSIFIED, a1.error
    a1 = _tie_cuda_error_to_graph(ctx.runner, found, a1)
    name_rank(found, ctx.runner.jobs.get(a1.label), a1, a2 if a2.label != a1.label else None)
    spec, on_cuda = recorded_backend_spec(ctx.runner.run_dir(a1.label))
    found.original_backend, found.backend_kind = (spec.name, spec.kind) if spec else (None, None)
    return Classified(a1, spec, on_cuda)


def _unless_recording_changed_it(runner: VariantRunner, found: Found, recorded: Attempt,
                                 plain: Attempt) -> Attempt | None:
    """The recorded run and the plain one ended differently: flaky, unless each ends the same way again (one
    more plain and one more recorded run, side by side), in which case recording changed the outcome. Then
    the plain runs are the program's behaviour: the diagnosis goes on from them, without the recording
    (nothing is minified from a recording that does not fail as the program does). A program that fails
    only on its first run, or at random, ends otherwise in one of the pairs: flaky. None when it is flaky
    (already concluded)."""
    runner.reporter.status("the recorded run and the plain run ended differently: running each once more")
    with found.timed("reproduce_again"):
        plain_again = runner.submit(Variant.original(3))
        recorded_again = runner.submit(Variant.original(4, record=True, accuracy_tolerance=DEFAULT_TOLERANCE))
        again, again_recorded = plain_again.result(), recorded_again.result()
    found.attempts += [again, again_recorded]
    if again.signature != plain.signature:
        flaky(found, plain, again)
        return None
    if again_recorded.signature != recorded.signature:
        flaky(found, recorded, again_recorded)
        return None
    found.recording_changed_outcome = True
    found.notes.append(f"recording the graphs changed the outcome (recorded run: {recorded.error or recorded.outcome}; "
                       f"two plain runs: {plain.error or plain.outcome}): the plain runs are diagnosed, and no "
                       "graph is minified from the recording")
    found.session = runner.sessions.get(plain.label)
    return plain


def _tie_cuda_error_to_graph(runner: VariantRunner, found: Found, a1: Attempt) -> Attempt:
    """A CUDA kernel error that no compiled graph raised may still be a compiled kernel's: CUDA reports
    it at a later call, after the graph that launched it returned. One more recorded run with
    CUDA_LAUNCH_BLOCKING=1 raises it at its launch; when a compiled graph raised it there, that run
    stands for the failure from here on (its graphs are minified, its frames say where)."""
    failure = found.session.failures[0] if found.session and found.session.failures else None
    if (failure is None or not asynchronous_cuda_error(failure) or os.environ.get("CUDA_LAUNCH_BLOCKING") == "1"
            or failed_graph(runner.run_dir(a1.label))):
        return a1
    runner.reporter.status("CUDA reported a kernel error after the fact: re-running with CUDA_LAUNCH_BLOCKING=1")
    with found.timed("launch_blocking"):
        blocking = runner.submit(Variant.launch_blocking()).result()
    found.attempts.append(blocking)
    graph = failed_graph(runner.run_dir(blocking.label)) if blocking.outcome == "fail" else None
    if graph is None:
        found.notes.append(f"with CUDA_LAUNCH_BLOCKING=1 no compiled graph raised the CUDA error ({blocking.outcome}: "
                           f"{blocking.error or 'no error'}): the failing kernel was launched outside compiled code")
        return a1
    found.notes.append(f"CUDA reported the kernel error only after compiled graph {graph} had returned; with "
                       "CUDA_LAUNCH_BLOCKING=1 that graph raises it, so that run is the one diagnosed")
    found.session = runner.sessions.get(blocking.label)
    found.category, found.error = blocking.category or found.category, blocking.error
    return blocking


def failed_graph(run_dir: Path) -> str | None:
    """The recorded graph that the graph recorder saw raise last (the failure the run ended with) in
    `run_dir`'s run, if any; a graph its accuracy check judged wrong raised nothing."""
    try:
        failures = [f for f in read_failures(RunPaths(run_dir).graphs_dir) if f.phase != "accuracy"]
    except RecordError:  # a damaged recording: the minifier reports it when it reads the same file
        return None
    return failures[-1].graph if failures else None


def recorded_backend_spec(run_dir: Path) -> tuple[BackendSpec | None, bool]:
    """The recorded backend as the recording can carry it (a registered name, the script's own source, or
    a stub): the failing graph's (a script may compile other functions with other backends), else the
    first graph's; and whether any recorded graph's inputs were on a CUDA device."""
    try:
        index = read_index(RunPaths(run_dir).graphs_dir)
    except RecordError:  # a damaged recording: the minifier reports it when it reads the same file
        return None, False
    entries, failed = {e.id: e for e in index}, failed_graph(run_dir)
    while failed in entries and entries[failed].backend is None and entries[failed].parent:
        failed = entries[failed].parent
    own = entries[failed].backend if failed in entries else None
    backend = own if own is not None and own.name else next(
        (e.backend for e in index if e.backend is not None and e.backend.name), None)
    return backend, any(e.on_cuda for e in index)

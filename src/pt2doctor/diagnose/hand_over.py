"""diagnose's hand-over steps: what each reader takes away.

Contract: `hand_over` gives the model's owner workarounds, the compiler settings that remove the failure on the
minimal graph (else on the reduced program) searched first in the warm workers (`diagnose.setting_search`), then
changes tried on copies of the script (`diagnose.workarounds`), beside the maintainers' hand-over (they share nothing,
so they run side by side), and once the bisection has named what it blames, that turned off by a config: repro.py in
PyTorch's idiom with a regression test (`diagnose.short_repro`), beside the compiler bisected on a copy of the
minifier's harness form (`found.minify.repro_path`, repro_graph.py once the short form is repro.py); what the owner
is handed is its result (`diagnose.reported.HandOver`). `where_to_look` looks up where the installed torch handles
the culprit ops, the bisected subsystem and a Dynamo failure (`diagnose.where_to_look`), for issue.md's "Where to
look".
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pt2doctor.bisect.driver import PendingBisection, bisect_repro
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.graph_stages import dynamo_graph_script
from pt2doctor.diagnose.narrowing import SideRuns
from pt2doctor.diagnose.recording import Recording
from pt2doctor.diagnose.reported import HandOver
from pt2doctor.diagnose.reproduce import Classified, Reproduced
from pt2doctor.diagnose.runs import VariantRunner
from pt2doctor.diagnose.setting_search import applies as settings_apply
from pt2doctor.diagnose.setting_search import program_applies, search_on_program, search_settings
from pt2doctor.diagnose.short_repro import hand_over_short
from pt2doctor.diagnose.step import Context
from pt2doctor.diagnose.where_to_look import Reached, look_where, start_reached
from pt2doctor.diagnose.workarounds import (
    HandOverSoFar,
    find_workarounds,
    start_fallback,
    tries_workarounds,
    try_config,
)
from pt2doctor.model.diagnosis import Bisection, FailingStage
from pt2doctor.model.minify import FailureSignature, MinifyResult
from pt2doctor.model.source_refs import SourceRef

if TYPE_CHECKING:
    from pt2doctor.processes.pool import WorkerPool
    from pt2doctor.processes.workers import Workers

_BISECT_START = {FailingStage.INDUCTOR: "inductor", FailingStage.DECOMP_PARTITION: "aot_eager_decomp_partition"}


def hand_over(ctx: Context, found: Found, classify: Classified, side_runs: SideRuns, recording: Recording,
              reproduce: Reproduced) -> HandOver:
    """The owner's workarounds (runs of copies of the script) beside the maintainers' repro, test and bisection."""
    text = _minimal_graph_text(found)  # read before the short form may take repro.py's name
    tried = HandOverSoFar()
    with ThreadPoolExecutor(1, thread_name_prefix="pt2doctor-workarounds") as side:
        arounds = side.submit(_owner, ctx, found, tried, reproduce.workers, text, recording)
        tried.bisection = _for_maintainers(ctx, found, classify, side_runs)
        arounds.result()
    _try_workarounds(ctx, found, tried, try_config)  # what the bisection blamed, turned off: known only now
    return tried.frozen()


def _owner(ctx: Context, found: Found, tried: HandOverSoFar, workers: Workers | None, text: str | None,
           recording: Recording) -> None:
    """The compiler settings searched on the minimal graph (else the reduced program) in the warm workers, then the
    workarounds on copies of the script, those settings among them; where the next candidate after the settings is
    the stage's backend, its run goes ahead beside the search (`start_fallback`)."""
    graph = text if settings_apply(found) else None
    if ctx.options.workarounds and (graph is not None or program_applies(found)) and not ctx.runner.closed:
        _try_workarounds(ctx, found, tried, start_fallback)
        ctx.reporter.status(f"trying compiler settings on the {'minimal graph' if graph else 'reduced program'}")
        with found.timed("settings"), _warm_pool(ctx, workers) as pool:
            tried.settings = (search_on_program(pool, found, ctx.options.script) if graph is None else
                              search_settings(pool, found, graph, lambda: _dynamo_graph(ctx, recording)))
        if tried.settings is not None:
            found.notes.append(tried.settings.describe())
    _try_workarounds(ctx, found, tried, find_workarounds)
    ctx.runner.drop_ahead()


@contextmanager
def _warm_pool(ctx: Context, workers: Workers | None) -> Iterator[WorkerPool]:
    """The warm workers the graph steps (or the program reducer) ran in; where none were kept (no recorded graph
    failed by itself: a wrong result the accuracy check found), workers started for the search alone and closed after
    it."""
    if workers is not None:
        yield workers.pool
        return
    from pt2doctor.processes.workers import start_workers

    with start_workers(ctx.options.jobs, ctx.options.query_timeout_s, ctx.options.out_dir, verify=False) as workers:
        yield workers.pool


def _dynamo_graph(ctx: Context, recording: Recording) -> tuple[str, FailureSignature] | None:
    """The recorded Dynamo graph compiled whole, its values saved in `settings/` of the output directory."""
    if not recording.usable:
        return None
    folder = ctx.options.out_dir / "settings"
    folder.mkdir(exist_ok=True)
    return dynamo_graph_script(recording, folder)


def _minimal_graph_text(found: Found) -> str | None:
    m = found.minify
    try:
        return Path(m.repro_path).read_text() if m is not None and m.verified else None
    except OSError:
        return None


def _try_workarounds(ctx: Context, found: Found, tried: HandOverSoFar,
                     tries: Callable[[VariantRunner, Found, HandOverSoFar, bool], None]) -> None:
    if tries_workarounds(ctx.options):
        with found.timed("workarounds"), ctx.runner.step("workarounds"):
            tries(ctx.runner, found, tried, ctx.options.cost)


def _for_maintainers(ctx: Context, found: Found, classify: Classified, side_runs: SideRuns) -> Bisection | None:
    """repro.py in PyTorch's idiom, verified, and the compiler bisected on the harness form, side by side: the
    bisection works on a copy (`_bisected_copy`), so the short form taking repro.py's name cannot reach it; what the
    bisection blamed."""
    m = found.minify
    if m is None or not m.verified:
        return None
    options, reporter = ctx.options, ctx.reporter
    bisects = found.stage in _BISECT_START and options.bisect
    with ThreadPoolExecutor(1, thread_name_prefix="pt2doctor-bisect") as side:
        bisection = side.submit(_bisect, ctx, _BISECT_START[found.stage], _bisected_copy(m), m.signature.text,
                                side_runs.bisector) if bisects and found.stage is not None else None
        reporter.status("writing repro.py in PyTorch's idiom and verifying it both ways")
        with found.timed("short_repro"):
            hand_over_short(found, options.out_dir, classify.attempt.signature or "", options.query_timeout_s,
                            side_runs.workers.forks if side_runs.workers else None)
        if bisection is None:
            return None
        bisected, seconds = bisection.result()
        found.took("bisect", seconds)
        reporter.status(f"bisection: {bisected.describe()}")
        return bisected


def _bisect(ctx: Context, backend: str, repro: Path, target: str, pending: PendingBisection | None
            ) -> tuple[Bisection, float]:
    """CompilerBisector on `repro` from `backend`, in the process warmed up for it where there is one (`pending`);
    with its seconds."""
    ctx.reporter.status("bisecting the compiler on the minimal repro (CompilerBisector)")
    started, jobs = time.monotonic(), ctx.options.jobs
    bisection = (pending.run(repro, target, backend=backend, jobs=jobs) if pending else
                 bisect_repro(repro, target, ctx.options.out_dir / "bisect", backend=backend, jobs=jobs))
    return bisection, round(time.monotonic() - started, 3)


def _bisected_copy(m: MinifyResult) -> Path:
    """The minifier's harness form copied for the bisector, beside the values it reads (`repro_inputs.pt`)."""
    repro = Path(m.repro_path)
    folder = repro.parent / "bisect"
    folder.mkdir(exist_ok=True)
    copy = folder / repro.name
    shutil.copyfile(repro, copy)
    values = repro.with_name("repro_inputs.pt")
    if values.exists() and not (folder / values.name).exists():
        (folder / values.name).symlink_to(values)
    return copy


def reached(ctx: Context, found: Found) -> Reached:
    """What of the compiler the reduced program reached, looked up beside the hand-over (`where_to_look` reads it)."""
    return start_reached(found, ctx.options.out_dir)


def where_to_look(ctx: Context, found: Found, classify: Classified, side_runs: SideRuns, reached: Reached,
                  hand_over: HandOver | None = None) -> tuple[SourceRef, ...]:
    workers = side_runs.workers
    return look_where(found, ctx.runner.run_dir(classify.attempt.label), ctx.options.out_dir, hand_over,
                      workers.pool if workers is not None else None, reached)

"""diagnose's reduction steps: the failing graph minified (before the stage is known when the first run already
showed a compiled graph failing, else after), then the user's program reduced when no graph gave a verified
repro, or when the one that did has no short form in PyTorch's idiom. The work is `diagnose.graph_minify` and
`diagnose.program`'s; these are the steps that call them."""

from __future__ import annotations

from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.graph_minify import minify_graph
from pt2doctor.diagnose.narrowing import SideRuns
from pt2doctor.diagnose.program import reduce_the_program
from pt2doctor.diagnose.recording import Recording
from pt2doctor.diagnose.reproduce import Classified, Reproduced
from pt2doctor.diagnose.stages import GRAPH_STAGES, REFERENCE
from pt2doctor.diagnose.step import Context
from pt2doctor.model.diagnosis import FailingStage, ProgramReason
from pt2doctor.model.minify import MinifyResult


def minifies_early(ctx: Context, found: Found, side_runs: SideRuns, recording: Recording) -> bool:
    return side_runs.early and recording.usable


def minify_early(ctx: Context, found: Found, side_runs: SideRuns, recording: Recording) -> MinifyResult | None:
    """A recorded graph failed: minified now, in the workers the stage ladder ran in (while the program's stage runs
    go on, where the graph did not decide the stage)."""
    minify_graph(ctx.options, found, ctx.reporter, ctx.minify_reporter, recording, side_runs.workers,
                 ctx.reduction_s())
    return found.minify


def minifies_now(ctx: Context, found: Found, side_runs: SideRuns, recording: Recording) -> bool:
    return found.stage in GRAPH_STAGES and ctx.options.minify and not side_runs.early and recording.usable


def minify(ctx: Context, found: Found, side_runs: SideRuns, recording: Recording) -> MinifyResult | None:
    return minify_early(ctx, found, side_runs, recording)


def reduces_the_program(ctx: Context, found: Found) -> bool:
    """No graph gave a verified repro, or the one that did has no short form (`diagnose.program`, reason "short")."""
    m = found.minify
    return ctx.options.minify and found.stage is not None and not (m and m.verified and m.short_repro is not None)


def program_reduction(ctx: Context, found: Found, classify: Classified, reproduce: Reproduced) -> bool:
    """The program, with the stage's own backend forced (the simplest that fails), judged by that run's failure, in
    the warm workers started beside the first run where there are any."""
    backend = next((b for b, s in REFERENCE if s == found.stage), None)
    failed = next((a for a in found.attempts if backend and a.backend == backend and a.outcome == "fail"),
                  classify.attempt)
    with ctx.runner.gpu.whole():  # its workers and verification runs are the program's too
        reduce_the_program(ctx.options, found, ctx.reporter, failed, backend,
                           _reason(found), at_once=ctx.runner.gpu.limit,
                           budget_s=ctx.reduction_s(), pool=reproduce.workers.pool if reproduce.workers else None,
                           forks=reproduce.workers.forks if reproduce.workers else None)
    return found.program is not None


def _reason(found: Found) -> ProgramReason:
    if found.minify is not None and found.minify.verified:
        return "short"
    return "dynamo" if found.stage is FailingStage.DYNAMO else "fallback"

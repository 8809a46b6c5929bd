"""diagnose's reduction steps: the failing graph minified (before the stage is known when the first run already
showed a compiled graph failing, else after), then the user's program reduced when no graph gave a verified
repro, or when the one that did has no short form in PyTorch's idiom. The work is `diagnose.graph_minify` and
`diagnose.program`'s; these are the steps that call them."""

from __future__ import annotations

import time
from functools import partial

from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.graph_minify import minify_graph
from pt2doctor.diagnose.narrowing import SideRuns
from pt2doctor.diagnose.program import reduce_the_program
from pt2doctor.diagnose.recording import Recording
from pt2doctor.diagnose.reproduce import Classified, Reproduced
from pt2doctor.diagnose.short_repro import hand_over_program, repro_lines
from pt2doctor.diagnose.stages import GRAPH_STAGES, REFERENCE
from pt2doctor.diagnose.step import Context
from pt2doctor.diagnose.workarounds import start_call, tries_workarounds
from pt2doctor.model.diagnosis import FailingStage, ProgramReason
from pt2doctor.model.minify import MinifyResult
from pt2doctor.model.runtime import RuntimeTriage


def minifies_early(ctx: Context, found: Found, side_runs: SideRuns, recording: Recording) -> bool:
    return side_runs.early and recording.usable


def minify_early(ctx: Context, found: Found, side_runs: SideRuns, recording: Recording,
                 runtime_triage: RuntimeTriage | None = None) -> MinifyResult | None:
    """A recorded graph failed: minified now, in the workers the stage ladder ran in (while the program's stage runs
    go on, where the graph did not decide the stage); the bisector warms up meanwhile, and once the minifier's first
    passes name the culprit, the first workaround's run goes ahead (`workarounds.start_call`; stopped where no
    verified graph came of it: the workarounds then go by the reduced program). Where the runtime triage named the
    first bad kernel, the minifier starts from its nodes."""
    if side_runs.bisector is not None:
        side_runs.bisector.start()
    narrowed = partial(start_call, ctx.runner, found) if tries_workarounds(ctx.options) else None
    minify_graph(ctx.options, found, ctx.reporter, ctx.minify_reporter, recording, side_runs.workers,
                 ctx.reduction_s(), narrowed=narrowed, fault=runtime_triage.fault if runtime_triage else None)
    if not (found.minify and found.minify.verified):
        ctx.runner.drop_ahead()
    return found.minify


def minifies_now(ctx: Context, found: Found, side_runs: SideRuns, recording: Recording) -> bool:
    return found.stage in GRAPH_STAGES and ctx.options.minify and not side_runs.early and recording.usable


def minify(ctx: Context, found: Found, side_runs: SideRuns, recording: Recording,
           runtime_triage: RuntimeTriage | None = None) -> MinifyResult | None:
    return minify_early(ctx, found, side_runs, recording, runtime_triage)


def reduces_the_program(ctx: Context, found: Found) -> bool:
    """No graph gave a verified repro, or the one that did has no short form (`diagnose.program`, reason "short")."""
    m = found.minify
    return ctx.options.minify and found.stage is not None and not (m and m.verified and m.short_repro is not None)


def program_reduction(ctx: Context, found: Found, classify: Classified, reproduce: Reproduced) -> bool:
    """The program, with the stage's own backend forced (the simplest that fails), judged by that run's failure, in
    the warm workers started beside the first run where there are any."""
    return _reduce_program(ctx, found, classify, reproduce)


def _reduce_program(ctx: Context, found: Found, classify: Classified, reproduce: Reproduced) -> bool:
    """The reduction's seconds: its share of the diagnosis's --budget, or the reducer's own; for a short form of a
    verified graph repro (reason "short") at most `_SHORT_SHARE` of the time the diagnosis took before it."""
    reason = _reason(found)
    left = ctx.reduction_s()
    budget_s = max(_SHORT_AT_LEAST_S, _SHORT_SHARE * (time.monotonic() - ctx.started)) if reason == "short" else None
    budget_s = left if budget_s is None else budget_s if left is None else min(budget_s, left)
    backend = next((b for b, s in REFERENCE if s == found.stage), None)
    failed = next((a for a in found.attempts if backend and a.backend == backend and a.outcome == "fail"),
                  classify.attempt)
    with ctx.runner.gpu.whole():  # its workers and verification runs are the program's too
        reduce_the_program(ctx.options, found, ctx.reporter, failed, backend,
                           reason, at_once=ctx.runner.gpu.limit,
                           budget_s=budget_s, pool=reproduce.workers.pool if reproduce.workers else None,
                           forks=reproduce.workers.forks if reproduce.workers else None)
    return found.program is not None


# The most lines a maintainer reads in a repro (issue 39): a harness form longer than this has the program reduced too
SHORT_LINES = 40
# ... in at most this share of the time the diagnosis took before it (at least `_SHORT_AT_LEAST_S`), and so is the
# program reduced where the minimal graph has no short form at all (a higher-order op's backward graph): a verified
# repro is in hand already, and the reduction's last checks mostly shorten names and values (rand_like_where_eval:
# 43 -> 14 lines in 145 checks of 0.5 s, 79 s, where the diagnosis had taken 49 s; pytorch#145208 on the H200: 38 ->
# 18 lines in 118 checks, 157 s, where it had taken 40 s)
_SHORT_SHARE = 0.5
_SHORT_AT_LEAST_S = 15.0


def harness_too_long(ctx: Context, found: Found) -> bool:
    """repro.py stayed the minifier's harness form (no short form of the graph reproduced both ways: the graph's values
    or its RNG are not what plain torch calls make) and is longer than `SHORT_LINES`."""
    m = found.minify
    return (ctx.options.minify and m is not None and m.verified and found.short is None and found.program is None
            and repro_lines(m.repro_path) > SHORT_LINES)


def program_for_short(ctx: Context, found: Found, classify: Classified, reproduce: Reproduced) -> bool:
    """The program reduced (reason "short"), handed over as repro.py where it verified and is shorter than the harness
    form, which stays beside it as repro_graph.py."""
    harness = repro_lines(found.minify.repro_path) if found.minify is not None else 0
    _reduce_program(ctx, found, classify, reproduce)
    p = found.program
    return p is not None and repro_lines(p.repro_path) < harness and hand_over_program(found)


def _reason(found: Found) -> ProgramReason:
    if found.minify is not None and found.minify.verified:
        return "short"
    return "dynamo" if found.stage is FailingStage.DYNAMO else "fallback"

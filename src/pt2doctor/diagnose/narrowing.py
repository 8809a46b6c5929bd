"""diagnose's stage-by-stage narrowing: the runs beside it, the failing stage, and what the stage says.

Contract, step by step (each a `diagnose.step` step):
- `side_runs` starts what may run beside the stage's search: the one-op control of an Inductor failure of a
  kind a broken installation gives every program (`diagnose.control`), in a fresh interpreter where no recorded
  graph failed (else in the warm workers, `control`), and readies the bisector when the failing graph will be
  minified and then bisected (`SideRuns`; closed at the end: it warms up from the minifier's start, once the verdict
  is said); it hands the graph steps the warm workers started beside the first run (`Reproduced.workers`) when a
  recorded graph failed.
- `stage_evidence` climbs the ladder on the recorded graph, in those workers (`diagnose.graph_stages`): when it
  decides, the stage is known from here on, for a few graph-level runs; otherwise the whole program climbs it, its
  runs started now (lowest rung first) so they overlap the minifier (`StageEvidence`).
- `stages` (only where the graph did not decide) waits for those runs up to the first that fails, which names the
  stage; rungs above it are stopped.
- `control` waits for the control: when the trivial program fails the same way, the environment is at
  fault and the procedure stops (no culprit is named, whatever was minified meanwhile).
- `compilation_off`: when even `eager` fails, a run with compilation off (`set_stance("force_eager")`)
  tells a bug in the script (`user_error`, stop) from a Dynamo one.
- `refine` says what the stage means for the category (`found.refine_category`) and where it failed.
- `replay` (a Dynamo failure): replay.py for the recorded failing frame, checked alone.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pt2doctor.bisect.driver import PendingBisection
from pt2doctor.diagnose.conclusions import environment_fails, refine_category, user_error
from pt2doctor.diagnose.control import ControlKind, ControlRun, control_in, start_control
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.graph_stages import GraphLadder, climb_on_graph
from pt2doctor.diagnose.recording import Recording
from pt2doctor.diagnose.reported import Replayed
from pt2doctor.diagnose.reproduce import Classified, Reproduced
from pt2doctor.diagnose.stages import blame, ladder
from pt2doctor.diagnose.step import STOP, Concluded, Context
from pt2doctor.diagnose.user_frames import where
from pt2doctor.diagnose.variants import Variant
from pt2doctor.model.category_policy import policy
from pt2doctor.model.diagnosis import STAGE_TITLES, Attempt, Control, FailingStage
from pt2doctor.processes.fresh import verify
from pt2doctor.processes.pool import WorkerPoolError
from pt2doctor.reduce.program import target_of
from pt2doctor.reduce.program_harness import ProgramRun, harness_text

if TYPE_CHECKING:
    from pt2doctor.processes.workers import Workers



@dataclass(frozen=True)
class SideRuns:
    """What runs beside the stage's search: the control (None when not wanted), the warm workers for the graph steps
    (`Reproduced.workers`, which closes them; None when no recorded graph failed), the bisector, warming up from the
    minifier's start (None when not wanted), and whether the failing graph is minified before the stage is known
    (`early`)."""

    control: ControlRun | None
    workers: Workers | None
    bisector: PendingBisection | None
    early: bool

    def close(self) -> None:
        if self.bisector is not None:
            self.bisector.cancel()


def side_runs(ctx: Context, found: Found, classify: Classified, reproduce: Reproduced) -> SideRuns:
    options, inductor = ctx.options, found.original_backend == "inductor"
    graph = policy(found.category).graph and not found.recording_changed_outcome
    early = options.minify and graph
    workers = reproduce.workers if graph else None  # warm since the first run (closed with `reproduce`)
    # Inductor failing: would a one-op program fail the same way here? In the warm workers once the minifier is
    # done with them (`control`), else in a fresh interpreter while the stage runs go on
    target = target_of(classify.attempt.signature or "", False)
    control = (start_control(ControlKind.INDUCTOR, _device(classify), target, options.out_dir)
               if workers is None and _wants_control(found) else None)
    # the bisector will likely be wanted: it imports and warms up while the minifier works, started once the verdict
    # is said (`minify_early`): its warm-up beside the stage ladder slowed the verdict on a few cores
    forks = reproduce.workers.forks if reproduce.workers is not None else None
    bisector = PendingBisection(options.out_dir / "bisect", cuda=classify.on_cuda, deferred=True, forks=forks) if (
        early and options.bisect and inductor) else None
    return SideRuns(control, workers, bisector, early)


def _wants_control(found: Found) -> bool:
    return found.original_backend == "inductor" and policy(found.category).environment


def _device(classify: Classified) -> str:
    return "cuda" if classify.on_cuda else "cpu"


@dataclass(frozen=True)
class StageEvidence:
    """How the stage is found: the ladder on the recorded graph (`graph`, when it was climbed), and where it did not
    decide, the runs of the whole program, by backend, started lowest rung first (`queued`)."""

    graph: GraphLadder | None
    queued: dict[str, Future[Attempt]]

    @property
    def decided(self) -> bool:
        return self.graph is not None and self.graph.conclusive


def stage_evidence(ctx: Context, found: Found, side_runs: SideRuns, recording: Recording,
                   reproduce: Reproduced) -> StageEvidence:
    """The ladder on the recorded graph where there are workers to climb it in; else (or when it does not decide)
    the program's stage runs, started now. The second run of the program starts after either: the verdict comes
    first."""
    try:
        return _stage_evidence(ctx, found, side_runs, recording)
    finally:
        if reproduce.pending is not None:
            reproduce.pending.start()


def _stage_evidence(ctx: Context, found: Found, side_runs: SideRuns, recording: Recording) -> StageEvidence:
    ladder_on_graph = _climb(ctx, found, side_runs, recording)
    if ladder_on_graph is not None and ladder_on_graph.conclusive:
        found.stage, found.stages = blame(ladder(found.original_backend), ladder_on_graph.outcomes)
        how = ("by the script's backend as AOTAutograd handed it over, its compiled run judged against its eager "
               "one (the lower rungs do not apply past AOTAutograd: skipped)" if ladder_on_graph.after_aot else
               "with each backend of the ladder")
        runs = ladder_on_graph.queries
        found.notes.append(f"the stage was found on recorded graph {ladder_on_graph.graph}, compiled alone {how} "
                           f"({runs} graph-level run{'s' if runs != 1 else ''} in warm workers), not by running "
                           "the program again")
        return StageEvidence(ladder_on_graph, {})
    if ladder_on_graph is not None:
        found.notes.append(f"the stage is found on the whole program: {ladder_on_graph.why}")
    rungs = ladder(found.original_backend)[:-1]  # the top rung is the original run, which failed
    return StageEvidence(ladder_on_graph, {backend: ctx.runner.submit(Variant.with_backend(backend))
                                           for backend, _ in rungs})


def _climb(ctx: Context, found: Found, side_runs: SideRuns, recording: Recording) -> GraphLadder | None:
    """The stage ladder on the recorded graph, in the warm workers; None where there are none, the recording cannot
    be used, or the workers could not run it (said: the program's stage runs decide)."""
    if side_runs.workers is None or not recording.usable:
        return None
    ctx.reporter.status("finding the failing stage on the recorded graph (each backend of the ladder on it alone)")
    try:
        return climb_on_graph(side_runs.workers.pool, recording, found.original_backend, ctx.options.out_dir)
    except WorkerPoolError as exc:  # the warm workers did not start or ended
        found.notes.append(f"the stage is found on the whole program: the warm workers could not run the recorded "
                           f"graph ({exc})")
        return None


def on_the_program(ctx: Context, found: Found, stage_evidence: StageEvidence) -> bool:
    return not stage_evidence.decided


def stages(ctx: Context, found: Found, classify: Classified, stage_evidence: StageEvidence) -> FailingStage | None:
    """Climb the ladder up to the first run that fails; the original run is the top rung (it failed)."""
    started, a1 = time.monotonic(), classify.attempt
    rungs, queued = ladder(found.original_backend), stage_evidence.queued
    outcomes: dict[str, str] = {}
    for backend, _ in rungs[:-1]:
        attempt = queued[backend].result()
        found.attempts.append(attempt)
        outcomes[backend] = attempt.outcome
        if attempt.outcome == "fail":
            if attempt.signature != a1.signature:
                found.notes.append(f"{backend} fails differently: {attempt.signature}")
            break
    for backend, future in queued.items():
        if backend in outcomes:
            continue
        if future.done() and not future.cancelled() and future.exception() is None:
            outcomes[backend] = future.result().outcome  # it ran (its progress line said so): not "skipped"
            found.attempts.append(future.result())
        else:
            ctx.runner.stop(future)  # above the rung that failed: not wanted
    if "fail" not in outcomes.values():
        outcomes[rungs[-1][0]] = "fail"
    found.stage, found.stages = blame(rungs, outcomes)
    waited = time.monotonic() - started
    ran = sum(a.wall_s for a in found.attempts if a.backend in found.stages and a.label != a1.label)
    if ran > waited + 1.0:
        found.notes.append(f"the stage runs took {ran:.1f} s, mostly while the steps before ran (they overlap): "
                           f"the 'stages' step itself waited {waited:.1f} s")
    return found.stage


def has_control(ctx: Context, found: Found, side_runs: SideRuns) -> bool:
    return side_runs.control is not None or (side_runs.workers is not None and _wants_control(found))


def control(ctx: Context, found: Found, side_runs: SideRuns, classify: Classified) -> Control | Concluded | None:
    """The one-op control (run beside the steps so far, or now in the warm workers); where it failed the same way,
    the diagnosis is concluded on the environment (`Concluded`), and whatever was minified meanwhile is no
    culprit."""
    target = target_of(classify.attempt.signature or "", False)
    try:
        ran = (side_runs.control.result() if side_runs.control is not None else
               control_in(side_runs.workers.pool, ControlKind.INDUCTOR, _device(classify), target,  # type: ignore[union-attr]
                          ctx.options.out_dir))
    except WorkerPoolError as exc:  # the warm workers did not start or ended: the control in an interpreter of its own
        found.notes.append(f"the one-op control ran in a fresh interpreter: the warm workers could not run it ({exc})")
        ran = start_control(ControlKind.INDUCTOR, _device(classify), target, ctx.options.out_dir).result()
    if ran is None or not ran.fails_the_same_way:
        return ran
    found.minify = None
    where(found)
    environment_fails(found, ran)
    return Concluded(ran)


def at_dynamo(ctx: Context, found: Found) -> bool:
    return found.stage is FailingStage.DYNAMO


def compilation_off(ctx: Context, found: Found) -> bool:
    """Even backend='eager' fails: the script itself (`user_error`, `STOP`), or Dynamo?"""
    off = ctx.runner.submit(Variant.compilation_off()).result()
    found.attempts.append(off)
    if off.outcome == "fail":
        user_error(found, off)
        return STOP
    return True


def refine(ctx: Context, found: Found) -> FailingStage | None:
    ctx.reporter.status(f"failing stage: {STAGE_TITLES[found.stage] if found.stage else 'unknown'}")
    refine_category(found)
    where(found)
    return found.stage


def replays(ctx: Context, found: Found) -> bool:
    # a limit hit has no frame
    return found.stage is FailingStage.DYNAMO and policy(found.category).compilation_off


def replay(ctx: Context, found: Found, classify: Classified) -> Replayed | None:
    """replay.py for the recorded failing frame, checked to fail alone in a fresh interpreter."""
    try:
        return _replay(ctx, found, ctx.runner.run_dir(classify.attempt.label), classify.attempt.signature or "")
    except (OSError, ValueError, KeyError) as exc:
        found.notes.append(f"no replay: {type(exc).__name__}: {exc}")
        return None


def _replay(ctx: Context, found: Found, run_dir: Path, signature: str) -> Replayed | None:
    from pt2doctor.capture.child.frame_recorder import write_replay

    records = sorted((run_dir / "frames").glob("frame-*.pkl"))
    if not records:
        found.notes.append("no frame recording (the failure happened outside a frame Dynamo compiles)")
        return None
    ctx.reporter.status("replaying the failing frame alone (frame recording)")
    replayed = write_replay(records[0], ctx.options.script.resolve().parent, ctx.options.out_dir / "replay.py")
    # judged as every repro is: run as `python replay.py` under the harness that prints its failure's identity
    check = ctx.options.out_dir / "replay_check" / "replay.py"
    check.parent.mkdir(exist_ok=True)
    check.write_text(harness_text(replayed.read_text(),
                                  ProgramRun(str(replayed), str(replayed.parent), (replayed.name,))))
    ran = verify(check, target_of(signature, False), timeout_s=max(60.0, ctx.options.query_timeout_s), runs=1)
    if not ran.verified:
        found.notes.append("replay.py does not fail the same way (" + (
            "it did not finish in time" if ran.returncode is None and ran.seen is None else
            f"exit {ran.returncode}: {ran.seen.text if ran.seen else 'no failure'}") + ")")
    return Replayed(str(replayed), ran.verified)

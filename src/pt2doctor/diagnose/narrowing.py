"""diagnose's stage-by-stage narrowing: the runs beside it, the failing stage, and what the stage says.

Contract, step by step (each a `diagnose.step` step):
- `side_runs` starts what may run beside the stage runs: the one-op control of an Inductor failure of a
  kind a broken installation gives every program (`diagnose.control`), and the bisector, warming up,
  when the failing graph will be minified at once and then bisected (`SideRuns`; closed at the end).
- `stages` climbs the ladder (`diagnose.stages`): the queued reference-backend runs up to the first
  that fails names the stage.
- `control` waits for the control: when the trivial program fails the same way, the environment is at
  fault and the procedure stops (no culprit is named, whatever was minified meanwhile).
- `compilation_off`: when even `eager` fails, a run with compilation off (`set_stance("force_eager")`)
  tells a bug in the script (`user_error`, stop) from a Dynamo one.
- `refine` says what the stage means for the category (`found.refine_category`) and where it failed.
- `replay` (a Dynamo failure): replay.py for the recorded failing frame, checked alone.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from pt2doctor.bisect.driver import PendingBisection
from pt2doctor.diagnose.control import ControlKind, ControlRun, start_control
from pt2doctor.diagnose.found import Found, environment_fails, refine_category, user_error, where
from pt2doctor.diagnose.reproduce import Classified, Reproduced
from pt2doctor.diagnose.runs import Variant
from pt2doctor.diagnose.stages import blame, ladder
from pt2doctor.diagnose.step import STOP, Context
from pt2doctor.model import Category
from pt2doctor.model.diagnosis import STAGE_TITLES, FailingStage
from pt2doctor.processes.fresh import verify
from pt2doctor.reduce.program import target_of
from pt2doctor.reduce.program_harness import ProgramRun, harness_text

# categories a broken installation gives every program (no compiler, a broken Triton, a package that crashes)
_ENVIRONMENT_FAILURES = (Category.KERNEL_FAILURE, Category.BACKEND_FAILURE, Category.RUNTIME_CRASH)
# categories whose failure the graph recorder saw in a compiled graph: minified while the stages run
_GRAPH_FAILURES = (Category.KERNEL_FAILURE, Category.BACKEND_FAILURE, Category.RUNTIME_CRASH, Category.ACCURACY)


@dataclass(frozen=True)
class SideRuns:
    """What runs beside the stage runs: the control (None when not wanted), the bisector warming up (None when
    not wanted), and whether the failing graph is minified before the stage is known (`early`)."""

    control: ControlRun | None
    bisector: PendingBisection | None
    early: bool

    def close(self) -> None:
        if self.bisector is not None:
            self.bisector.cancel()


def side_runs(ctx: Context, found: Found, classify: Classified) -> SideRuns:
    options, inductor = ctx.options, found.original_backend == "inductor"
    device = "cuda" if classify.on_cuda else "cpu"
    # Inductor failing: would a one-op program fail the same way here? (runs while the stage runs go on)
    control = (start_control(ControlKind.INDUCTOR, device, target_of(classify.attempt.signature or "", False),
                             options.out_dir) if inductor and found.category in _ENVIRONMENT_FAILURES else None)
    early = options.minify and found.category in _GRAPH_FAILURES
    # the bisector will likely be wanted: let it import and warm up while the minifier works
    bisector = PendingBisection(options.out_dir / "bisect", cuda=classify.on_cuda) if (
        early and options.bisect and inductor) else None
    return SideRuns(control, bisector, early)


def stages(ctx: Context, found: Found, reproduce: Reproduced, classify: Classified) -> FailingStage | None:
    """Climb the ladder up to the first run that fails; the original run is the top rung (it failed)."""
    started, a1 = time.monotonic(), classify.attempt
    rungs, queued = ladder(found.original_backend), reproduce.queued
    top = rungs[-1][0]
    climb = rungs if top in queued else rungs[:-1]
    outcomes: dict[str, str] = {}
    for backend, _ in climb:
        attempt = (queued.get(backend) or ctx.runner.submit(Variant.with_backend(backend))).result()
        found.attempts.append(attempt)
        outcomes[backend] = attempt.outcome
        if attempt.outcome == "fail":
            if attempt.signature != a1.signature:
                found.notes.append(f"{backend} fails differently: {attempt.signature}")
            break
    for backend, future in queued.items():
        future.cancel()
        if backend not in outcomes and future.done() and not future.cancelled() and future.exception() is None:
            outcomes[backend] = future.result().outcome  # it ran (its progress line said so): not "skipped"
            found.attempts.append(future.result())
    if "fail" not in outcomes.values():
        outcomes[top] = "fail"
    found.stage, found.stages = blame(rungs, outcomes)
    waited = time.monotonic() - started
    ran = sum(a.wall_s for a in found.attempts if a.backend in found.stages and a.label != a1.label)
    if ran > waited + 1.0:
        found.notes.append(f"the stage runs took {ran:.1f} s, mostly while the steps before ran (they overlap): "
                           f"the 'stages' step itself waited {waited:.1f} s")
    return found.stage


def has_control(ctx: Context, found: Found, side_runs: SideRuns) -> bool:
    return side_runs.control is not None


def control(ctx: Context, found: Found, side_runs: SideRuns) -> bool:
    """Whether the one-op control (run beside the steps so far) failed the same way: then the diagnosis is
    concluded on the environment (`STOP`), and whatever was minified meanwhile is no culprit."""
    assert side_runs.control is not None
    found.control = side_runs.control.result()
    if found.control is None or not found.control.fails_the_same_way:
        return False
    found.minify = None
    where(found)
    environment_fails(found, found.control)
    return STOP


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
    return found.stage is FailingStage.DYNAMO and found.category is not Category.RECOMPILATION


def replay(ctx: Context, found: Found, classify: Classified) -> str | None:
    """replay.py for the recorded failing frame, checked to fail alone in a fresh interpreter
    (`found.replay_verified`)."""
    try:
        return _replay(ctx, found, ctx.runner.run_dir(classify.attempt.label), classify.attempt.signature or "")
    except (OSError, ValueError, KeyError) as exc:
        found.notes.append(f"no replay: {type(exc).__name__}: {exc}")
        return None


def _replay(ctx: Context, found: Found, run_dir: Path, signature: str) -> str | None:
    from pt2doctor.capture.child.frame_recorder import write_replay

    records = sorted((run_dir / "frames").glob("frame-*.pkl"))
    if not records:
        found.notes.append("no frame recording (the failure happened outside a frame Dynamo compiles)")
        return None
    ctx.reporter.status("replaying the failing frame alone (frame recording)")
    replayed = write_replay(records[0], ctx.options.script.resolve().parent, ctx.options.out_dir / "replay.py")
    found.replay = str(replayed)
    # judged as every repro is: run as `python replay.py` under the harness that prints its failure's identity
    check = ctx.options.out_dir / "replay_check" / "replay.py"
    check.parent.mkdir(exist_ok=True)
    check.write_text(harness_text(replayed.read_text(),
                                  ProgramRun(str(replayed), str(replayed.parent), (replayed.name,))))
    ran = verify(check, target_of(signature, False), timeout_s=max(60.0, ctx.options.query_timeout_s), runs=1)
    found.replay_verified = ran.verified
    if not ran.verified:
        found.notes.append("replay.py does not fail the same way (" + (
            "it did not finish in time" if ran.returncode is None and ran.seen is None else
            f"exit {ran.returncode}: {ran.seen.text if ran.seen else 'no failure'}") + ")")
    return found.replay

"""The troubleshooting guide's procedure, automated: reproduce, classify, find the stage, minify, hand over.

Contract: `diagnose(options, reporter, publish=) -> Diagnosis` never raises for anything the script does (it
crashes, hangs, fails only sometimes, never compiles); every step's time is in `timings` and every run it made in
`runs`. The verdict is said and handed to `publish` as soon as it is known, then the diagnosis so far after every step
(`diagnose.checkpoint`). A Ctrl-C, SIGTERM or SIGHUP stops the runs in flight and returns what was found so far
(`stopped_by`, `interrupted=True`); so does `options.budget_s` running out, which concludes on what was found
(`diagnose.stopping`). Where no GPU is visible, every process the diagnosis starts has OpenMP's idle threads sleep
rather than spin, where the user set no wait policy (`launch.threads_wait_passively`): its runs are forked side by
side on the CPU, and a spinning thread burns the core another run needs; it changes no value a kernel computes. Where
a GPU is visible the runs are not forked, compute on the GPU, and keep the user's policy (no gain measured there).

The procedure is `STEPS`, run by `diagnose.step.run_steps`: each step is a function of the context, the
verdict so far and the earlier steps' results it names as parameters, and returns its own result; a
step that concludes stops the procedure. The runs are made in parallel where they do not depend on each
other: the reference-backend runs are queued behind the two reproductions, the control and the
bisector's warm-up run beside the stage runs, a graph that failed in the backend is minified while the
stage runs go on, and the workarounds are tried beside the maintainers' hand-over.
"""

from __future__ import annotations

import ast
import signal
import time
from pathlib import Path
from typing import Any

from pt2doctor.capture.runner import Reporter, SilentReporter
from pt2doctor.diagnose import hand_over as over
from pt2doctor.diagnose import narrowing as narrow
from pt2doctor.diagnose import reduction, upgrade
from pt2doctor.diagnose.checkpoint import Checkpoint, Publish
from pt2doctor.diagnose.conclusions import conclude, stopped
from pt2doctor.diagnose.endings import Unparsed
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.frozen import freeze
from pt2doctor.diagnose.options import DiagnoseOptions
from pt2doctor.diagnose.recording import pick_recording
from pt2doctor.diagnose.reported import ExportConcluded
from pt2doctor.diagnose.reproduce import (
    Classified,
    Reproduced,
    Restart,
    classify,
    recorded_backend_spec,
    repeated,
    reproduce,
)
from pt2doctor.diagnose.runs import ScriptCall, VariantRunner
from pt2doctor.diagnose.runtime_triage import runtime_triage, triage_flaky, triages
from pt2doctor.diagnose.stage_signatures import compare_stage_signatures
from pt2doctor.diagnose.step import STOP, Concluded, Context, Step, run_steps
from pt2doctor.diagnose.stopping import Stop, shielded, stoppable
from pt2doctor.diagnose.where_to_look import look_where
from pt2doctor.diagnose.workarounds import HandOverSoFar, try_export
from pt2doctor.export.diagnose.steps import diagnose_export
from pt2doctor.model import Category, SourceLoc
from pt2doctor.model.diagnosis import Diagnosis
from pt2doctor.model.settings import settings
from pt2doctor.processes import launch

__all__ = ["STEPS", "DiagnoseOptions", "diagnose", "recorded_backend_spec"]


def _export(ctx: Context, found: Found, reproduce: Reproduced, classify: Classified) -> Concluded | None:
    """torch.export or AOTInductor failed: its own steps (`export.diagnose.steps`) conclude, with the workaround tried
    and where to look."""
    def known() -> None:  # said and written before the program is reduced, the repeat made beside the reduction
        if reproduce.pending is not None:
            reproduce.pending.start()
        if ctx.after_step is not None:
            ctx.after_step("export")

    exported = diagnose_export(ctx.runner, found, classify.attempt, ctx.options, ctx.minify_reporter, known)
    if exported is None:
        return None
    tried = HandOverSoFar()
    if ctx.options.workarounds:
        with found.timed("workarounds"), ctx.runner.step("workarounds"):
            try_export(ctx.runner, found, exported.finding, tried, ctx.options.cost)
    with found.timed("where_to_look"):  # the procedure's own where-to-look step does not run after this one
        refs = look_where(found, ctx.runner.run_dir(classify.attempt.label), ctx.options.out_dir,
                          export=exported.finding)
    return Concluded(ExportConcluded(exported.finding, tried.frozen(), refs, exported.control))


def _reproduce(ctx: Context, found: Found) -> Reproduced | Concluded:
    """The failure reproduced; when it did not repeat (flaky), on CUDA, runtime triage looks for a kernel touching
    memory outside its buffers before the procedure ends."""
    reproduced = reproduce(ctx, found)
    return _triage_flaky(ctx, found) if reproduced is STOP else reproduced


def _repeated(ctx: Context, found: Found, reproduce: Reproduced) -> bool | Restart | Concluded:
    """The second run compared with the first; flaky on CUDA: runtime triage, as after `_reproduce`."""
    outcome = repeated(ctx, found, reproduce)
    return _triage_flaky(ctx, found) if outcome is STOP else outcome


def _triage_flaky(ctx: Context, found: Found) -> Concluded:
    """The procedure ends on a failure that did not repeat (or on the first run's verdict): the runtime triage of a
    flaky one (`diagnose.runtime_triage.triage_flaky`) is the concluding step's result, None where none ran."""
    triage = None
    if found.flaky:
        recorded = found.attempts[0]
        spec, on_cuda = recorded_backend_spec(ctx.runner.run_dir(recorded.label))
        triage = triage_flaky(ctx.options, ctx.runner, found, recorded, spec, on_cuda)
    return Concluded(triage)


def _conclude(ctx: Context, found: Found) -> bool:
    conclude(found)
    return True


STEPS: tuple[Step, ...] = (
    Step("reproduce", _reproduce, writes="attempts session ending flaky category error recording_changed_outcome "
                                         "notes backend"),
    Step("classify", classify, writes="category error attempts notes session rank backend"),
    Step("export", _export, writes="attempts category ending hint minify notes program stage user_frames"),
    Step("side_runs", narrow.side_runs),
    Step("runtime_triage", runtime_triage, when=triages, writes="attempts"),
    Step("recording", pick_recording, writes="attempts notes"),
    Step("stage_evidence", narrow.stage_evidence, writes="notes stage stages"),
    Step("minify_early", reduction.minify_early, when=reduction.minifies_early, writes="attempts minify notes"),
    Step("stages", narrow.stages, "finding the failing stage", when=narrow.on_the_program,
         writes="attempts notes stage stages"),
    Step("needs_compiler", compare_stage_signatures, writes="notes stage stages"),
    Step("control", narrow.control, when=narrow.has_control,
         writes="minify ending notes user_frames hint"),
    Step("compilation_off", narrow.compilation_off, "it fails with backend='eager' too: running it with compilation "
         "off", when=narrow.at_dynamo, writes="attempts category stage ending user_frames hint"),
    Step("refine", narrow.refine, writes="category notes user_frames hint"),
    Step("replay", narrow.replay, when=narrow.replays, writes="notes"),
    Step("minify", reduction.minify, when=reduction.minifies_now, writes="attempts minify notes"),
    Step("program_reduction", reduction.program_reduction, when=reduction.reduces_the_program,
         writes="program minify notes"),
    Step("reached", over.reached),
    Step("hand_over", over.hand_over, writes="attempts notes minify program short harness_test"),
    Step("program_for_short", reduction.program_for_short, when=reduction.harness_too_long,
         writes="program minify notes short"),
    Step("repeated", _repeated, writes="attempts category error flaky ending hint minify notes "
                                      "program recording_changed_outcome session stage stages user_frames "
                                      "backend short harness_test set_aside"),
    Step("versions", upgrade.versions, "running repro.py under other torch releases (--versions)", when=upgrade.wanted,
         writes="notes"),
    Step("where_to_look", over.where_to_look, writes="notes"),
    Step("conclude", _conclude, writes="ending flaky"),
)


def diagnose(options: DiagnoseOptions, reporter: Reporter | None = None, minify_reporter: Any = None,
             publish: Publish | None = None) -> Diagnosis:
    """`publish`: handed the diagnosis so far after every step (the verdict first, `diagnose.checkpoint`)."""
    reporter = reporter or SilentReporter()
    found = Found(command=(str(options.script), *options.args))
    started = time.monotonic()
    if _syntax_error(options.script, found):
        return freeze(found)
    env = {"TORCHDYNAMO_DEBUG_FUNCTION": options.function} if options.function else {}
    call = ScriptCall(options.script, options.args, options.out_dir, options.timeout_s, env, options.torchrun)
    found.torchrun = options.torchrun
    runner = VariantRunner(call, options.jobs, reporter)
    results: dict[str, Any] = {}
    checkpoint = Checkpoint(found, runner, results, [s.name for s in STEPS], reporter, publish)
    stop = Stop()
    ctx = Context(options, runner, reporter, minify_reporter, checkpoint, started)
    try:
        with stoppable(_alarm_s(options.budget_s), on_stop=lambda: _end_runs(runner)) as stop, \
                launch.threads_wait_passively(not runner.gpu.visible):  # the runs share the cores
            _run_procedure(ctx, found, results)
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP or the budget (`diagnose.stopping`)
        _stopped_by(stop.reason(exc), found, runner)
    except Exception as exc:  # pt2doctor's own error between the steps (`run_steps` keeps a step's): nothing is lost
        if runner.closed:  # what met the runner the stop had closed
            _stopped_by(stop.reason(KeyboardInterrupt()), found, runner)
        elif settings().strict:
            raise
        else:
            found.internal_errors.append(f"procedure: {type(exc).__name__}: {exc}")
    finally:
        with shielded():
            runner.close()
            runner.wait_ended(_ENDING_S)
            if (shared := runner.gpu.said()) is not None:
                found.notes.append(shared)
            found.notes += [f"pt2doctor's own error in its {error}: the steps that needed that step's result did "
                            "not run, what the others found stands (exit status 70); please report it with this "
                            "bundle" for error in found.internal_errors]
            found.timings["total"] = round(time.monotonic() - started, 3)
    return checkpoint.frozen()


def _stopped_by(why: str, found: Found, runner: VariantRunner) -> None:
    with shielded():
        found.stopped_by = why
        found.notes.append(f"{why}: the steps above it are complete, the rest did not run")
        labels = {a.label for a in found.attempts}
        found.attempts += [a for label, a in runner.finished.items() if label not in labels]
        stopped(found)


def _run_procedure(ctx: Context, found: Found, results: dict[str, Any]) -> None:
    """The steps; then, where a step concluded before `repeated` compared the second run with the first, that
    comparison (a failure that does not repeat is flaky, whatever was concluded); from `classify` again, on the plain
    runs, when the recording changed the outcome."""
    run_steps(STEPS, ctx, found, results)
    while True:
        outcome = results.get("repeated")
        reproduced = results.get("reproduce")
        if not isinstance(outcome, Restart) and isinstance(reproduced, Reproduced):
            outcome = _repeated(ctx, found, reproduced)
            if isinstance(outcome, Concluded):
                results["repeated"] = outcome.result
        if not isinstance(outcome, Restart):
            return
        found.restart_from_plain_runs()
        results.clear()
        results["reproduce"] = outcome.reproduced
        run_steps(STEPS[1:], ctx, found, results)


def _end_runs(runner: VariantRunner) -> None:
    """A stop: every child is told to end (verifications, look-ups, the fork server, which takes the runs it forked
    with it), then the script's runs are ended as not wanted (a forked run's end is known once its server has gone)."""
    launch.signal_all(signal.SIGTERM)
    runner.close()


_ENDING_S = 5.0  # the most a stop waits for the runs it ended to go, so that the ledger counts them

# What of a --budget is kept for after the stop: ending what runs (on a loaded machine, seconds), the bundle's
# writing (the HTML report) and the interpreter's start before the diagnosis began count in the wall time a user
# measures.
_BUNDLE_S = 3.0


def _alarm_s(budget_s: float | None) -> float | None:
    return None if budget_s is None else max(budget_s * 0.5, budget_s * 0.9 - _BUNDLE_S)


def _syntax_error(script: Path, found: Found) -> bool:
    try:
        ast.parse(script.read_bytes(), filename=str(script))
    except SyntaxError as exc:
        found.category = Category.USER_ERROR
        found.error = f"SyntaxError: {exc.msg}"
        found.user_frames = [SourceLoc(str(script), exc.lineno or 0, "<module>", (exc.text or "").strip())]
        found.ending = Unparsed(exc.msg, exc.lineno or 0)
        return True
    return False

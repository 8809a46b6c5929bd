"""The troubleshooting guide's procedure, automated: reproduce, classify, find the stage, bisect, minify.

Contract: `diagnose(options, reporter) -> Diagnosis` never raises for anything the script does (it
crashes, hangs, fails only sometimes, never compiles); every step's time is in `timings`, and a
Ctrl-C stops the runs in flight and returns what was found so far (`interrupted=True`).

Steps, with the runs made in parallel where they do not depend on each other:
1. reproduce: the unchanged script twice (the first with the graph recorder on); a failure that
   does not repeat the same way is `flaky` and nothing is minified from it. The reference-backend
   runs of step 3 are queued behind these two so the cores never idle.
2. classify: the category `run` gives the first failure (`analysis.failures`). A CUDA kernel error
   that no compiled graph raised is re-run once with CUDA_LAUNCH_BLOCKING=1 (CUDA reports such
   errors at a later call): when a compiled graph raises it there, that run is the one diagnosed.
3. stage: the script under `eager`, `aot_eager`, `aot_eager_decomp_partition` (`diagnose.stages`);
   the first that fails names the stage. When even `eager` fails, a run with compilation off
   (`set_stance("force_eager")`) tells a bug in the script (`user_error`, stop) from a Dynamo one.
4. minify the recorded graph that failed (after AOT for Inductor, after Dynamo otherwise; when an
   after-AOT graph does not fail alone, the Dynamo graph it came from with the script's backend) and
   verify the repro in a fresh interpreter (`diagnose.graph_minify`, `reduce`). When the first run already shows a compiled graph
   failing (a kernel, backend, crash or accuracy failure), this starts right after step 1, while
   the stage runs of step 3 go on in the pool, so the cores stay busy.
5. bisect an Inductor (or decomposition) failure on the minimal repro (`bisect.driver`).
6. look up where the installed torch handles the culprit ops, the bisected subsystem and a Dynamo
   failure (`diagnose.where_to_look`), for issue.md's "Where to look".
"""

from __future__ import annotations

import ast
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pt2doctor.analysis.failures import asynchronous_cuda_error
from pt2doctor.capture.process_meta import RunPaths
from pt2doctor.capture.runner import Reporter, SilentReporter
from pt2doctor.bisect.driver import PendingBisection, bisect_repro
from pt2doctor.diagnose.options import DiagnoseOptions
from pt2doctor.diagnose.control import ControlKind, ControlRun, start_control
from pt2doctor.diagnose.found import (Found, conclude, environment_fails, flaky, interrupted, refine_category, success,
                                      user_error, where)
from pt2doctor.diagnose.export import diagnose_export
from pt2doctor.diagnose.ranks import name_rank
from pt2doctor.diagnose.runs import ScriptCall, Variant, VariantRunner
from pt2doctor.diagnose.graph_minify import minify_graph
from pt2doctor.diagnose.program import reduce_the_program
from pt2doctor.diagnose.short_repro import hand_over_short
from pt2doctor.diagnose.workarounds import find_workarounds
from pt2doctor.diagnose.stages import GRAPH_STAGES, REFERENCE, blame, ladder
from pt2doctor.diagnose.where_to_look import look_where
from pt2doctor.model import Category, SourceLoc
from pt2doctor.model.diagnosis import STAGE_TITLES, Attempt, Diagnosis, FailingStage
from pt2doctor.model.minify import BackendSpec
from pt2doctor.model.recording import read_failures, read_index
from pt2doctor.model.serialize import RecordError
from pt2doctor.reduce.program import target_of

# categories a broken installation gives every program (no compiler, a broken Triton, a package that crashes)
_ENVIRONMENT_FAILURES = (Category.KERNEL_FAILURE, Category.BACKEND_FAILURE, Category.RUNTIME_CRASH)
# categories whose failure the graph recorder saw in a compiled graph: minified while the stages run
_GRAPH_FAILURES = (Category.KERNEL_FAILURE, Category.BACKEND_FAILURE, Category.RUNTIME_CRASH, Category.ACCURACY)
_BISECT_START = {FailingStage.INDUCTOR: "inductor", FailingStage.DECOMP_PARTITION: "aot_eager_decomp_partition"}


def diagnose(options: DiagnoseOptions, reporter: Reporter | None = None, minify_reporter: Any = None) -> Diagnosis:
    reporter = reporter or SilentReporter()
    found = Found(command=(str(options.script), *options.args))
    started = time.monotonic()
    if _syntax_error(options.script, found):
        return found.freeze()
    env = {"TORCHDYNAMO_DEBUG_FUNCTION": options.function} if options.function else {}
    call = ScriptCall(options.script, options.args, options.out_dir, options.timeout_s, env, options.torchrun)
    found.torchrun = options.torchrun
    runner = VariantRunner(call, options.jobs, reporter)
    try:
        _procedure(options, runner, found, reporter, minify_reporter)
    except KeyboardInterrupt:
        found.interrupted = True
        found.notes.append("interrupted (Ctrl-C): the steps above it are complete, the rest did not run")
        labels = {a.label for a in found.attempts}
        found.attempts += [a for label, a in runner.finished.items() if label not in labels]
        interrupted(found)
    finally:
        runner.close()
        found.timings["total"] = round(time.monotonic() - started, 3)
    return found.freeze()


def _syntax_error(script: Path, found: Found) -> bool:
    try:
        ast.parse(script.read_bytes(), filename=str(script))
    except SyntaxError as exc:
        found.category = Category.USER_ERROR
        found.error = f"SyntaxError: {exc.msg}"
        found.user_frames = [SourceLoc(str(script), exc.lineno or 0, "<module>", (exc.text or "").strip())]
        found.headline = f"the script does not parse: {exc.msg} at {script}:{exc.lineno} (nothing was run)"
        found.next_steps.append("Fix the syntax error, then run pt2doctor diagnose again.")
        return True
    return False


def _procedure(options: DiagnoseOptions, runner: VariantRunner, found: Found, reporter: Reporter,
               minify_reporter: Any) -> None:
    with found.timed("reproduce"):
        first = runner.submit(Variant.original(1, record=True))
        second = runner.submit(Variant.original(2))
        # queued behind the reproductions, so the cores never idle; cancelled if they are not needed
        speculative = {backend: runner.submit(Variant.with_backend(backend)) for backend, _ in REFERENCE}
        a1, a2 = first.result(), second.result()
    found.attempts += [a1, a2]
    found.session = runner.sessions.get(a1.label)
    if a1.outcome == "pass" and a2.outcome == "pass":
        success(found)
        return
    if a1.signature != a2.signature:
        plain = _unless_recording_changed_it(runner, found, a1, a2)
        if plain is None:
            return
        a1 = plain
        if a1.outcome == "pass":
            success(found)
            return
    found.category, found.error = a1.category or Category.UNCLASSIFIED, a1.error
    a1 = _tie_cuda_error_to_graph(runner, found, a1)
    name_rank(found, runner.jobs.get(a1.label), a1, a2 if a2.label != a1.label else None)
    if diagnose_export(runner, found, a1, speculative, options, minify_reporter):  # torch.export or AOTInductor failed
        return
    spec, on_cuda = recorded_backend_spec(runner.run_dir(a1.label))
    found.original_backend, found.backend_kind = (spec.name, spec.kind) if spec else (None, None)
    # Inductor failing: would a one-op program fail the same way here? (runs while the stage runs go on)
    control = (start_control(ControlKind.INDUCTOR, "cuda" if on_cuda else "cpu", target_of(a1.signature or "", False),
                             options.out_dir) if found.original_backend == "inductor" and found.category in
               _ENVIRONMENT_FAILURES else None)
    early = options.minify and found.category in _GRAPH_FAILURES
    pending = None
    if early and options.bisect and found.original_backend == "inductor":
        # the bisector will likely be wanted: let it import and warm up while the minifier works
        pending = PendingBisection(options.out_dir / "bisect", cuda=on_cuda)
    try:
        _after_reproduction(options, runner, found, reporter, minify_reporter, a1, speculative, early, pending, control)
    finally:
        if pending is not None:
            pending.cancel()


def _after_reproduction(options: DiagnoseOptions, runner: VariantRunner, found: Found, reporter: Reporter,
                        minify_reporter: Any, a1: Attempt, speculative: dict[str, Future[Attempt]], early: bool,
                        pending: PendingBisection | None, control: ControlRun | None) -> None:
    if early:  # a recorded graph failed in the backend: minify it now, while the stage runs go on
        minify_graph(options, runner, runner.run_dir(a1.label), found, reporter, minify_reporter)
    reporter.status("finding the failing stage")
    with found.timed("stages"):
        _find_stage(runner, speculative, found, a1)
    if control is not None and _environment_fails(found, control):
        return
    ran = sum(a.wall_s for a in found.attempts if a.backend in found.stages and a.label != a1.label)
    if ran > found.timings.get("stages", 0.0) + 1.0:
        found.notes.append(f"the stage runs took {ran:.1f} s, mostly while the steps before ran (they overlap): "
                           f"the 'stages' step itself waited {found.timings.get('stages', 0.0):.1f} s")
    if found.stage is FailingStage.DYNAMO:  # even backend='eager' fails: the script itself, or Dynamo?
        reporter.status("it fails with backend='eager' too: running it with compilation off")
        with found.timed("compilation_off"):
            off = runner.submit(Variant.compilation_off()).result()
        found.attempts.append(off)
        if off.outcome == "fail":
            user_error(found, off)
            return
    reporter.status(f"failing stage: {STAGE_TITLES[found.stage] if found.stage else 'unknown'}")
    refine_category(found)
    where(found)
    if found.stage is FailingStage.DYNAMO and found.category is not Category.RECOMPILATION:  # a limit hit has no frame to replay
        with found.timed("replay"):
            try:
                _replay(options, runner.run_dir(a1.label), found, reporter)
            except (OSError, ValueError, KeyError) as exc:
                found.notes.append(f"no replay: {type(exc).__name__}: {exc}")
    if found.stage in GRAPH_STAGES and options.minify and not early:
        minify_graph(options, runner, runner.run_dir(a1.label), found, reporter, minify_reporter)
    if options.minify and found.stage is not None and not (found.minify and found.minify.verified):
        # with the stage's own backend forced (the simplest that fails), judged by that run's failure
        backend = next((b for b, s in REFERENCE if s == found.stage), None)
        failed = next((a for a in found.attempts if backend and a.backend == backend and a.outcome == "fail"), a1)
        reduce_the_program(options, found, reporter, failed, backend,
                           "dynamo" if found.stage is FailingStage.DYNAMO else "fallback")
    # the owner's workarounds (runs of copies of the script) beside the maintainers' hand-over: they share nothing
    with ThreadPoolExecutor(1, thread_name_prefix="pt2doctor-workarounds") as side:
        arounds = side.submit(_try_workarounds, options, runner, found)
        _hand_over(options, found, reporter, a1, pending)
        arounds.result()
    with found.timed("where_to_look"):
        look_where(found, runner.run_dir(a1.label), options.out_dir)
    conclude(found)


def _try_workarounds(options: DiagnoseOptions, runner: VariantRunner, found: Found) -> None:
    if options.workarounds and options.torchrun is None:  # a job's copy would need torchrun's launch too
        with found.timed("workarounds"):
            find_workarounds(runner, found)


def _hand_over(options: DiagnoseOptions, found: Found, reporter: Reporter, a1: Attempt,
               pending: PendingBisection | None) -> None:
    """For PyTorch's maintainers: repro.py in their idiom and a regression test, then the compiler bisected
    on the minifier's harness form (`found.minify.repro_path`, repro_graph.py once the short form is repro.py)."""
    if not (found.minify and found.minify.verified):
        return
    reporter.status("writing repro.py in PyTorch's idiom and verifying it both ways")
    with found.timed("short_repro"):
        hand_over_short(found, options.out_dir, a1.signature or "", options.query_timeout_s)
    if found.stage in _BISECT_START and options.bisect:
        reporter.status("bisecting the compiler on the minimal repro (CompilerBisector)")
        with found.timed("bisect"):
            repro, target = Path(found.minify.repro_path), found.minify.signature.text
            backend = _BISECT_START[found.stage]  # type: ignore[index]
            found.bisection = (
                pending.run(repro, target, backend=backend, jobs=options.jobs) if pending else
                bisect_repro(repro, target, options.out_dir / "bisect", backend=backend, jobs=options.jobs))
        reporter.status(f"bisection: {found.bisection.describe()}")


def _environment_fails(found: Found, running: ControlRun) -> bool:
    """Whether the one-op control (run beside the steps so far) failed the same way: then the diagnosis is
    concluded on the environment, and whatever was minified meanwhile is no culprit."""
    with found.timed("control"):
        control = running.result()
    found.control = control
    if control is None or not control.fails_the_same_way:
        return False
    found.minify = None
    where(found)
    environment_fails(found, control)
    return True


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
        recorded_again = runner.submit(Variant.original(4, record=True))
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
            or _failed_graph(runner.run_dir(a1.label))):
        return a1
    runner.reporter.status("CUDA reported a kernel error after the fact: re-running with CUDA_LAUNCH_BLOCKING=1")
    with found.timed("launch_blocking"):
        blocking = runner.submit(Variant.launch_blocking()).result()
    found.attempts.append(blocking)
    graph = _failed_graph(runner.run_dir(blocking.label)) if blocking.outcome == "fail" else None
    if graph is None:
        found.notes.append(f"with CUDA_LAUNCH_BLOCKING=1 no compiled graph raised the CUDA error ({blocking.outcome}: "
                           f"{blocking.error or 'no error'}): the failing kernel was launched outside compiled code")
        return a1
    found.notes.append(f"CUDA reported the kernel error only after compiled graph {graph} had returned; with "
                       "CUDA_LAUNCH_BLOCKING=1 that graph raises it, so that run is the one diagnosed")
    found.session = runner.sessions.get(blocking.label)
    found.category, found.error = blocking.category or found.category, blocking.error
    return blocking


def _failed_graph(run_dir: Path) -> str | None:
    """The recorded graph that the graph recorder saw fail last (the failure the run ended with) in
    `run_dir`'s run, if any."""
    try:
        failures = read_failures(RunPaths(run_dir).graphs_dir)
    except RecordError:  # a damaged recording: the minifier reports it when it reads the same file
        return None
    return failures[-1].graph if failures else None


def _find_stage(runner: VariantRunner, speculative: dict[str, Future[Attempt]], found: Found, a1: Attempt) -> None:
    """Climb the ladder up to the first run that fails; the original run is the top rung (it failed)."""
    rungs = ladder(found.original_backend)
    top = rungs[-1][0]
    climb = rungs if top in speculative else rungs[:-1]
    outcomes: dict[str, str] = {}
    for backend, _ in climb:
        attempt = (speculative.get(backend) or runner.submit(Variant.with_backend(backend))).result()
        found.attempts.append(attempt)
        outcomes[backend] = attempt.outcome
        if attempt.outcome == "fail":
            if attempt.signature != a1.signature:
                found.notes.append(f"{backend} fails differently: {attempt.signature}")
            break
    for backend, future in speculative.items():
        future.cancel()
        if backend not in outcomes and future.done() and not future.cancelled() and future.exception() is None:
            outcomes[backend] = future.result().outcome  # it ran (its progress line said so): not "skipped"
            found.attempts.append(future.result())
    if "fail" not in outcomes.values():
        outcomes[top] = "fail"
    found.stage, found.stages = blame(rungs, outcomes)


def recorded_backend_spec(run_dir: Path) -> tuple[BackendSpec | None, bool]:
    """The recorded backend as the recording can carry it (a registered name, the script's own source, or
    a stub): the failing graph's (a script may compile other functions with other backends), else the
    first graph's; and whether any recorded graph's inputs were on a CUDA device."""
    try:
        index = read_index(RunPaths(run_dir).graphs_dir)
    except RecordError:  # a damaged recording: the minifier reports it when it reads the same file
        return None, False
    entries, failed = {e.id: e for e in index}, _failed_graph(run_dir)
    while failed in entries and entries[failed].backend is None and entries[failed].parent:
        failed = entries[failed].parent
    own = entries[failed].backend if failed in entries else None
    backend = own if own is not None and own.name else next(
        (e.backend for e in index if e.backend is not None and e.backend.name), None)
    return backend, any(e.on_cuda for e in index)


def _replay(options: DiagnoseOptions, run_dir: Path, found: Found, reporter: Reporter) -> None:
    """Write replay.py for the recorded failing frame and check that it fails alone, in a fresh interpreter."""
    import subprocess
    import sys

    from pt2doctor.capture.child.frame_recorder import write_replay

    records = sorted((run_dir / "frames").glob("frame-*.pkl"))
    if not records:
        found.notes.append("no frame recording (the failure happened outside a frame Dynamo compiles)")
        return
    reporter.status("replaying the failing frame alone (frame recording)")
    replay = write_replay(records[0], options.script.resolve().parent, options.out_dir / "replay.py")
    found.replay = str(replay)
    expected = found.error.split(":", 1)[0]
    try:
        proc = subprocess.run([sys.executable, replay.name], capture_output=True, text=True, cwd=replay.parent,
                              timeout=max(60.0, options.query_timeout_s))
    except subprocess.TimeoutExpired:
        found.notes.append("replay.py did not finish in time")
        return
    found.replay_verified = proc.returncode != 0 and bool(expected) and expected in proc.stderr
    if not found.replay_verified:
        found.notes.append(f"replay.py does not fail the same way (exit {proc.returncode})")

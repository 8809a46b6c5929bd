"""The troubleshooting guide's procedure, automated: reproduce, classify, find the stage, bisect, minify.

Contract: `diagnose(options, reporter) -> Diagnosis` never raises for anything the script does (it
crashes, hangs, fails only sometimes, never compiles); every step's time is in `timings`, and a
Ctrl-C stops the runs in flight and returns what was found so far (`interrupted=True`).

Steps, with the runs made in parallel where they do not depend on each other:
1. reproduce: the unchanged script twice (the first with the graph recorder on); a failure that
   does not repeat the same way is `flaky` and nothing is minified from it. The reference-backend
   runs of step 3 are queued behind these two so the cores never idle.
2. classify: the category `run` gives the first failure (`analysis.failures`).
3. stage: the script under `eager`, `aot_eager`, `aot_eager_decomp_partition` (`diagnose.stages`);
   the first that fails names the stage. When even `eager` fails, a run with compilation off
   (`set_stance("force_eager")`) tells a bug in the script (`user_error`, stop) from a Dynamo one.
4. minify the recorded graph that failed (after AOT for Inductor, after Dynamo otherwise) and verify
   the repro in a fresh interpreter (`reduce`). When the first run already shows a compiled graph
   failing (a kernel, backend, crash or accuracy failure), this starts right after step 1, while
   the stage runs of step 3 go on in the pool, so the cores stay busy.
5. bisect an Inductor (or decomposition) failure on the minimal repro (`diagnose.bisect`).
"""

from __future__ import annotations

import ast
import json
import re
import time
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pt2doctor.capture.process_meta import RunPaths, is_user_file
from pt2doctor.capture.runner import Reporter, SilentReporter
from pt2doctor.diagnose.bisect import PendingBisection, bisect_repro, describe
from pt2doctor.diagnose.runs import ScriptCall, Variant, VariantRunner
from pt2doctor.diagnose.stages import REFERENCE, STAGE_TITLES, blame, ladder
from pt2doctor.model import Category, Environment, Session
from pt2doctor.model.diagnosis import Attempt, Bisection, Diagnosis
from pt2doctor.model.minify import MinifyResult

GRAPH_STAGES = ("aot_autograd", "decomp_partition", "inductor", "backend")
# categories whose failure the graph recorder saw in a compiled graph: minified while the stages run
_GRAPH_FAILURES = (Category.KERNEL_FAILURE.value, Category.BACKEND_FAILURE.value, Category.RUNTIME_CRASH.value,
                   Category.ACCURACY.value)
_BISECT_START = {"inductor": "inductor", "decomp_partition": "aot_eager_decomp_partition"}


@dataclass(frozen=True, slots=True)
class DiagnoseOptions:
    script: Path
    args: tuple[str, ...] = ()
    out_dir: Path = Path("pt2doctor-diagnose")
    timeout_s: float | None = None
    function: str | None = None
    jobs: int = 2
    query_timeout_s: float = 120.0
    minify: bool = True
    bisect: bool = True


@dataclass
class _Found:
    """What the procedure has established so far; frozen into a `Diagnosis` at the end."""

    command: tuple[str, ...]
    category: str | None = None
    stage: str | None = None
    stages: dict[str, str] = field(default_factory=dict)
    flaky: bool = False
    attempts: list[Attempt] = field(default_factory=list)
    headline: str = ""
    error: str = ""
    hint: str = ""
    original_backend: str | None = None
    user_frames: list[dict[str, Any]] = field(default_factory=list)
    minify: MinifyResult | None = None
    bisection: Bisection | None = None
    replay: str | None = None
    replay_verified: bool = False
    next_steps: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    interrupted: bool = False
    session: Session | None = None

    @contextmanager
    def timed(self, step: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.timings[step] = round(self.timings.get(step, 0.0) + time.monotonic() - started, 3)

    def freeze(self) -> Diagnosis:
        m = self.minify
        environment = self.session.environment if self.session else Environment()
        return Diagnosis(
            command=self.command, category=self.category, stage=self.stage, stages=dict(self.stages),  # type: ignore[arg-type]
            subsystem=self.bisection.subsystem if self.bisection else None, flaky=self.flaky,
            repro=m.repro_path if m else None, repro_verified=bool(m and m.verified),
            replay=self.replay, replay_verified=self.replay_verified,
            minified_nodes=m.nodes_after if m else None, culprit_ops=m.culprit_ops or m.ops if m else (),
            user_frames=tuple(self.user_frames), headline=self.headline, error=self.error, hint=self.hint,
            original_backend=self.original_backend, attempts=tuple(self.attempts), bisection=self.bisection,
            minify=m, next_steps=tuple(self.next_steps), notes=tuple(self.notes), timings=dict(self.timings),
            environment=environment, interrupted=self.interrupted, exit_code=_exit_code(self),
        )


def _exit_code(found: _Found) -> int:
    if found.interrupted:
        return 130
    if found.category is None:
        return 0
    if found.flaky:
        return 3
    return 2 if found.category == Category.USER_ERROR.value else 1


def diagnose(options: DiagnoseOptions, reporter: Reporter | None = None, minify_reporter: Any = None) -> Diagnosis:
    reporter = reporter or SilentReporter()
    found = _Found(command=(str(options.script), *options.args))
    started = time.monotonic()
    if _syntax_error(options.script, found):
        return found.freeze()
    env = {"TORCHDYNAMO_DEBUG_FUNCTION": options.function} if options.function else {}
    call = ScriptCall(options.script, options.args, options.out_dir, options.timeout_s, env)
    runner = VariantRunner(call, options.jobs, reporter)
    try:
        _procedure(options, runner, found, reporter, minify_reporter)
    except KeyboardInterrupt:
        found.interrupted = True
        found.notes.append("interrupted (Ctrl-C): the steps above it are complete, the rest did not run")
    finally:
        runner.close()
        found.timings["total"] = round(time.monotonic() - started, 3)
    return found.freeze()


def _syntax_error(script: Path, found: _Found) -> bool:
    try:
        ast.parse(script.read_bytes(), filename=str(script))
    except SyntaxError as exc:
        found.category = Category.USER_ERROR.value
        found.error = f"SyntaxError: {exc.msg}"
        found.user_frames = [{"file": str(script), "line": exc.lineno or 0}]
        found.headline = f"the script does not parse: {exc.msg} at {script}:{exc.lineno} (nothing was run)"
        found.next_steps.append("Fix the syntax error, then run pt2doctor diagnose again.")
        return True
    return False


def _procedure(options: DiagnoseOptions, runner: VariantRunner, found: _Found, reporter: Reporter,
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
        _success(found)
        return
    if a1.signature != a2.signature:
        _flaky(found, a1, a2)
        return
    found.category, found.error = a1.category or Category.UNCLASSIFIED.value, a1.error
    found.original_backend = _original_backend(runner.run_dir(a1.label))
    early = options.minify and found.category in _GRAPH_FAILURES
    pending = None
    if early and options.bisect and found.original_backend == "inductor":
        # the bisector will likely be wanted: let it import and warm up while the minifier works
        pending = PendingBisection(options.out_dir / "bisect", cuda=_on_cuda(runner.run_dir(a1.label)))
    try:
        _after_reproduction(options, runner, found, reporter, minify_reporter, a1, speculative, early, pending)
    finally:
        if pending is not None:
            pending.cancel()


def _after_reproduction(options: DiagnoseOptions, runner: VariantRunner, found: _Found, reporter: Reporter,
                        minify_reporter: Any, a1: Attempt, speculative: dict[str, Future[Attempt]], early: bool,
                        pending: PendingBisection | None) -> None:
    if early:  # a recorded graph failed in the backend: minify it now, while the stage runs go on
        _minify(options, runner.run_dir(a1.label), found, reporter, minify_reporter)
    reporter.status("finding the failing stage")
    with found.timed("stages"):
        _find_stage(runner, speculative, found, a1)
    reporter.status(f"failing stage: {STAGE_TITLES.get(found.stage or '', found.stage)}")
    if found.stage == "dynamo":
        with found.timed("compilation_off"):
            off = runner.submit(Variant.compilation_off()).result()
        found.attempts.append(off)
        if off.outcome == "fail":
            _user_error(found, off)
            return
    _refine_category(found)
    _where(found)
    if found.stage == "dynamo":
        with found.timed("replay"):
            try:
                _replay(options, runner.run_dir(a1.label), found, reporter)
            except (OSError, ValueError, KeyError) as exc:
                found.notes.append(f"no replay: {type(exc).__name__}: {exc}")
    if found.stage in GRAPH_STAGES and options.minify and not early:
        _minify(options, runner.run_dir(a1.label), found, reporter, minify_reporter)
    if found.minify and found.minify.verified and found.stage in _BISECT_START and options.bisect:
        reporter.status("bisecting the compiler on the minimal repro (CompilerBisector)")
        with found.timed("bisect"):
            repro, target = Path(found.minify.repro_path), found.minify.signature.text
            backend = _BISECT_START[found.stage]
            found.bisection = (
                pending.run(repro, target, backend=backend, jobs=options.jobs) if pending else
                bisect_repro(repro, target, options.out_dir / "bisect", backend=backend, jobs=options.jobs))
        reporter.status(f"bisection: {describe(found.bisection)}")
    _conclude(found)


def _find_stage(runner: VariantRunner, speculative: dict[str, Future[Attempt]], found: _Found, a1: Attempt) -> None:
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
    for future in speculative.values():
        future.cancel()
    if "fail" not in outcomes.values():
        outcomes[top] = "fail"
    found.stage, found.stages = blame(rungs, outcomes)


def _on_cuda(run_dir: Path) -> bool:
    index = RunPaths(run_dir).graphs_dir / "index.jsonl"
    return index.exists() and '"device": "cuda' in index.read_text()


def _original_backend(run_dir: Path) -> str | None:
    index = RunPaths(run_dir).graphs_dir / "index.jsonl"
    if not index.exists():
        return None
    for line in index.read_text().splitlines():
        try:
            backend = (json.loads(line).get("backend") or {}).get("name")
        except json.JSONDecodeError:
            continue
        if backend:
            return str(backend)
    return None


def _success(found: _Found) -> None:
    session = found.session
    compiled = bool(session and session.compiles)
    found.headline = ("nothing fails: the script ran twice without an error" if compiled else
                      "nothing to diagnose: the script ran without an error and never compiled anything")
    found.next_steps.append("If the results look wrong rather than failing, run `pt2doctor accuracy SCRIPT`.")
    if session and (session.graph_breaks or session.recompiles):
        found.next_steps.append("It has graph breaks or recompiles: `pt2doctor run SCRIPT` explains them.")


def _flaky(found: _Found, a1: Attempt, a2: Attempt) -> None:
    found.flaky = True
    found.category = (a1.category or a2.category or Category.UNCLASSIFIED.value)
    found.error = a1.error or a2.error
    found.headline = (f"flaky: the same command gave two different outcomes: run 1 {_said(a1)}; "
                      f"run 2 {_said(a2)}. Nothing was minified from it.")
    found.next_steps += [
        "Look for nondeterminism: random inputs without a seed, threads, time, or uninitialised memory.",
        "Seed everything (torch.manual_seed) and run pt2doctor diagnose again.",
    ]


def _said(attempt: Attempt) -> str:
    return "passed" if attempt.outcome == "pass" else f"failed ({attempt.signature})"


def _user_error(found: _Found, off: Attempt) -> None:
    found.category = Category.USER_ERROR.value
    same = off.signature == found.attempts[0].signature
    found.headline = ("the script fails the same way with compilation turned off: a bug in the script, not in "
                      "torch.compile" if same else
                      f"the script fails with compilation turned off too ({off.signature}): fix that first")
    _where(found)
    found.next_steps.append("Fix the error in the script (it also fails under torch.compiler.set_stance('force_eager')).")


def _refine_category(found: _Found) -> None:
    """An exception the script raised itself, that only a compiled run raises, means the compiled code
    computed something else: an accuracy problem found by the script's own check."""
    if found.category == Category.USER_ERROR.value and found.stage in GRAPH_STAGES:
        found.category = Category.ACCURACY.value
        found.notes.append("the script's own check fails only when compiled by a real backend: treated as accuracy")


def _where(found: _Found) -> None:
    session = found.session
    if session is None or not session.failures:
        return
    failure = session.failures[0]
    frames = _traced_frames(failure.message) + [{"file": loc.file, "line": loc.line} for loc in failure.user_frames]
    if failure.file and failure.line and {"file": failure.file, "line": failure.line} not in frames:
        frames.insert(0, {"file": failure.file, "line": failure.line})
    found.user_frames = frames
    fatal = next((b for b in session.graph_breaks if b.fatal), session.graph_breaks[0] if session.graph_breaks else None)
    if fatal is not None and found.stage == "dynamo":
        found.hint = next((h for h in fatal.hints), "")
        if not frames:
            found.user_frames = [{"file": fatal.file, "line": fatal.line}]


_USER_CODE = re.compile(r'File "([^"]+)", line (\d+)')


def _traced_frames(message: str) -> list[dict[str, Any]]:
    """The lines Dynamo was tracing when it failed (the "from user code:" block of its message), innermost first."""
    _, marker, block = message.partition("from user code:")
    if not marker:
        return []
    frames = [{"file": f, "line": int(n)} for f, n in _USER_CODE.findall(block.split("\n\n")[0])]
    return [f for f in reversed(frames) if is_user_file(f["file"])]


def _minify(options: DiagnoseOptions, run_dir: Path, found: _Found, reporter: Reporter, minify_reporter: Any) -> None:
    from pt2doctor.model.minify import BackendKind, BackendSpec, Stage
    from pt2doctor.reduce.fx_load import NothingToMinify, load_failing
    from pt2doctor.reduce.fx_minify import CannotReproduce, MinifyOptions, minify_case

    if found.category == Category.TIMEOUT.value:
        found.notes.append("a hang is not minified: every query would have to wait for the timeout")
        return
    reporter.status("minifying the failing graph")
    with found.timed("minify"):
        try:
            recorded = load_failing(run_dir, accuracy=found.category == Category.ACCURACY.value)
            context, expected = recorded.context, recorded.expected
            stage_backend = next((b for b, s in REFERENCE if s == found.stage), None)
            if stage_backend and context.stage is Stage.DYNAMO and context.backend.kind is BackendKind.NAMED:
                # the failure shows with a simpler backend: minify with it (faster queries, the stage isolated)
                context, expected = replace(context, backend=BackendSpec(BackendKind.NAMED, stage_backend)), None
            minify_options = MinifyOptions(options.out_dir, options.jobs, options.query_timeout_s,
                                           expected=expected, graph_name=recorded.graph_id)
            found.minify = minify_case(recorded.case, context, minify_options, minify_reporter).result
        except (NothingToMinify, CannotReproduce) as exc:
            found.notes.append(f"not minified: {exc}")
        except Exception as exc:  # the diagnosis so far must survive a minifier failure
            found.notes.append(_minifier_failure(exc))
    if found.minify:
        m = found.minify
        if m.stopped_early == "interrupted":  # the minifier kept its best; the diagnosis stops here
            raise KeyboardInterrupt
        word = "verified" if m.verified else "NOT verified"
        reporter.status(f"minified {m.nodes_before} -> {m.nodes_after} nodes {list(m.ops)} ({word})")


def _replay(options: DiagnoseOptions, run_dir: Path, found: _Found, reporter: Reporter) -> None:
    """Write replay.py for the recorded failing frame and check that it fails alone, in a fresh interpreter."""
    import subprocess
    import sys

    from pt2doctor.capture.frame_recorder import write_replay

    records = sorted((run_dir / "frames").glob("frame-*.pkl"))
    if not records:
        found.notes.append("no frame recording (the failure happened outside a frame Dynamo compiles)")
        return
    reporter.status("replaying the failing frame alone (frame recording)")
    replay = write_replay(records[0], options.script.resolve().parent, options.out_dir / "replay.py")
    found.replay = str(replay)
    expected = found.error.split(":", 1)[0]
    try:
        proc = subprocess.run([sys.executable, str(replay)], capture_output=True, text=True, cwd=options.out_dir,
                              timeout=max(60.0, options.query_timeout_s))
    except subprocess.TimeoutExpired:
        found.notes.append("replay.py did not finish in time")
        return
    found.replay_verified = proc.returncode != 0 and bool(expected) and expected in proc.stderr
    if not found.replay_verified:
        found.notes.append(f"replay.py does not fail the same way (exit {proc.returncode})")


def _minifier_failure(exc: Exception) -> str:
    if isinstance(exc, AttributeError) and "_OpNamespace" in str(exc):
        return (f"not minified: the graph calls a custom op that the script defines ({exc}); a standalone repro "
                "cannot define it")
    return f"the minifier failed: {type(exc).__name__}: {exc}"


def _conclude(found: _Found) -> None:
    stage_title = STAGE_TITLES.get(found.stage or "", found.stage or "an unknown stage")
    backend = found.original_backend or "the original backend"
    found.headline = f"{found.category} in {stage_title}: {found.error}"
    if found.stage == "dynamo":
        where = found.user_frames[0] if found.user_frames else None
        at = f" at {where['file']}:{where['line']}" if where else ""
        found.next_steps.append(f"Dynamo fails while tracing{at}; it fails with backend='eager' too, so no backend is involved.")
        if found.hint:
            found.next_steps.append(found.hint)
        if found.replay_verified:
            found.next_steps.append(f"`python {found.replay}` compiles that one frame again and fails the same way: "
                                    "attach it (with its frames/*.pkl recording) to the issue, or step through it.")
        found.next_steps.append("If the code there is valid PyTorch, file it as a Dynamo bug with issue.md.")
    elif found.stage in GRAPH_STAGES:
        passed = [b for b, r in found.stages.items() if r == "pass"]
        if passed:
            cost = "without your backend" if found.stage == "backend" else "without Inductor's code generation: slower"
            found.next_steps.append(f"Until it is fixed, torch.compile(..., backend={passed[-1]!r}) runs the script "
                                    f"({cost}).")
        if found.minify and found.minify.verified:
            found.next_steps.append(f"File issue.md with the verified repro ({found.minify.nodes_after} node(s): "
                                    f"{', '.join(found.minify.ops)}); `python repro.py` shows the bug.")
        elif found.minify:
            found.next_steps.append("The repro did not verify in a fresh interpreter: do not file it as minimal.")
        if found.stage == "backend":
            carried = " (the repro includes its source)" if found.minify else ""
            found.next_steps.append(f"The failure is inside {backend}: fix it there{carried}.")
    if found.bisection and found.bisection.subsystem:
        found.next_steps.append(f"CompilerBisector: disabling {describe(found.bisection)} makes it pass.")

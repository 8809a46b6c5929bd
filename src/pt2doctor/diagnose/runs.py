"""Run the user's unchanged script under variants (a backend swapped in, compilation off), several at once.

Contract: a `Variant` (`diagnose.variants`) is a label plus what the child changes before the script runs.
`VariantRunner.submit(variant)` starts the run on a
small thread pool (each thread supervises one child process) and returns a future `Attempt`; the
`Session` each run wrote stays in `runs/<label>/` as evidence. A script launched as a job (`ScriptCall.torchrun`)
runs under torchrun in every variant; the run stands for the rank whose failure ended first (`analysis.ranks`):
its session is the attempt's, and `run_dir(label)` is that rank's `rank-N/` (its own recording). Runs are
quiet: the script's output goes to that directory, progress goes to the reporter. `ahead(variant)` starts a run a later
step may ask for, at low priority (`launch.Priority`: on the cores the work awaited leaves idle); that step's `submit`
of the same variant gets it, given normal priority, and `drop_ahead()` stops the ones no step asked for;
`copy_ahead(folder, label, text)` does the same for a run of a copy of the script, which `run_a_copy` of the same
folder, label and text takes (a different text in that folder: the one ahead is stopped first).
`close()` cancels what has not started and stops what is still running. Every run is counted for the step that asked
for it (`Attempt.step`): the step `run_steps` is in on the submitting thread, or the part of a step a thread names with
`runner.step(name)` (the workarounds, tried beside the maintainers' hand-over), so a diagnosis can say what each step
cost in runs.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path

import msgspec

from pt2doctor.analysis import enrich, verdict_for
from pt2doctor.analysis.failures import caught_compile_failure, described, signature
from pt2doctor.analysis.ranks import job_of
from pt2doctor.capture.runner import Reporter, RunOptions, run_job, run_script, save, stop_all
from pt2doctor.capture.script_copy import copy_env, write_copy
from pt2doctor.diagnose.forking import Forking
from pt2doctor.diagnose.gpu_share import GpuShare
from pt2doctor.diagnose.variants import CALL_TIMES, Variant
from pt2doctor.model import SCHEMA, Session
from pt2doctor.model.child import CallTimes, Hooks, Overrides
from pt2doctor.model.diagnosis import Attempt
from pt2doctor.model.job import Job
from pt2doctor.model.serialize import RecordError, read_record
from pt2doctor.processes import launch
from pt2doctor.processes.servers import gpu_device_visible

# What the diagnosis's runs share of torch's compile caches (issue 38), said in diagnosis.json (`RunLedger.caches`).
# The rule is `Variant.user_autotuning` (whole-program runs) and `torch_compat.autotune_anew` (its callers: the warm
# workers, the fresh interpreters and forks that verify, the bisector); runtime triage's run has caches of its own.
SHARED_CACHES = ("Inductor's FX graph cache, AOTAutograd's and Triton's compiled kernels, in the user's cache "
                 "directories (a cached artifact is what compiling the same graph makes); never autotuning results: "
                 "the first run reads and writes the user's, as the user's own run does, and every later run, warm "
                 "worker and verification autotunes anew (the block size an autotuner picked can decide a failure)")


def steady_state_s(run_dir: str | Path) -> float | None:
    """The compiled regions' steady-state seconds of a timed run (`CallTimes.steady_state_s`); None when it has none."""
    try:
        return read_record(Path(run_dir) / CALL_TIMES, CallTimes).steady_state_s()
    except (OSError, RecordError):  # not timed, or it died before writing them
        return None


@dataclass(frozen=True, slots=True)
class ScriptCall:
    script: Path
    args: tuple[str, ...]
    out_dir: Path
    timeout_s: float | None
    env: dict[str, str] = field(default_factory=dict)
    torchrun: tuple[str, ...] | None = None  # launched as a job through torch.distributed.run, with these flags


@dataclass(frozen=True, slots=True)
class RunMade:
    """One run of the whole program, for the ledger (`diagnose.ledger`): the step it was made for, its label, its
    seconds, and whether it was still wanted when it ended (False: stopped, its seconds spent all the same)."""

    step: str
    label: str
    seconds: float
    wanted: bool


class VariantRunner:
    def __init__(self, call: ScriptCall, jobs: int, reporter: Reporter, step: str = "",
                 made: list[RunMade] | None = None, forking: Forking | None = None) -> None:
        self.call = call
        self.forking = forking if forking is not None else Forking()  # a copy's runner shares its maker's
        self.made: list[RunMade] = made if made is not None else []  # every run started, a copy's runner's too
        self._default_step = step  # a copy's runner: the step of the runner it was made from
        self._steps = threading.local()  # the step each submitting thread is in (`step`)
        self.reporter = reporter
        self.sessions: dict[str, Session] = {}
        self.finished: dict[str, Attempt] = {}  # every run that ended on its own, by label
        self.jobs: dict[str, Job] = {}  # a job's run, its ranks compared (`analysis.ranks`), by label
        self._rank_dirs: dict[str, Path] = {}  # a job's run: the directory of the rank it stands for
        self._submitted = 0
        self._finished = 0
        self._pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="pt2doctor-run")
        # the runs started `ahead`, beside the `jobs` others: background work takes no run's place
        self._ahead_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pt2doctor-run-ahead")
        self.gpu = GpuShare(gpu_device_visible(), jobs)  # runs share a GPU only as far as its memory holds
        self._closed = threading.Event()
        self._unwanted: dict[Future[Attempt], threading.Event] = {}  # set: that run is stopped, or never starts
        self._ahead: dict[str, tuple[Future[Attempt], launch.Priority]] = {}  # started `ahead`, by label
        self._copies_ahead: dict[Path, _CopyAhead] = {}  # started by `copy_ahead`, by folder

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Runs submitted from this thread inside are counted for the step `name`."""
        outer = getattr(self._steps, "name", None)
        self._steps.name = name
        try:
            yield
        finally:
            self._steps.name = outer

    def current_step(self) -> str:
        return getattr(self._steps, "name", None) or self._default_step

    def submit(self, variant: Variant) -> Future[Attempt]:
        """The run of `variant`: the one started `ahead`, from now on at normal priority, else a new one."""
        held = self._ahead.pop(variant.label, None)
        if held is not None:
            future, priority = held
            priority.urgent()
            return future
        return self._submit(variant)

    def in_background(self, variant: Variant) -> tuple[Future[Attempt], launch.Priority]:
        """`variant` started now in its turn, at low priority until the priority returned is made `urgent()`: a run
        awaited only after the work beside it (the first run's repeat, `diagnose.repeat.SecondRun`)."""
        priority = launch.Priority()
        return self._submit(variant, priority, ahead=False), priority

    def ahead(self, variant: Variant) -> None:
        """`variant` started now at low priority, for a step that may ask for it later (see the module's contract)."""
        if variant.label not in self._ahead:
            priority = launch.Priority()
            self._ahead[variant.label] = (self._submit(variant, priority, self._ahead_pool), priority)

    def copy_ahead(self, folder: Path, label: str, text: str) -> None:
        """A run of `text` as a copy of the script in `folder` (`run_a_copy`'s), started now at low priority."""
        if folder in self._copies_ahead or self.closed:
            return
        priority = launch.Priority()
        copy_runner = self._copy_runner(folder, text, step="workarounds")
        future = copy_runner._submit(Variant(label, timed=True), priority, self._ahead_pool)
        self._unwanted[future] = copy_runner._unwanted[future]  # stopped by `stop`, `close` and `drop_ahead` too
        self._copies_ahead[folder] = _CopyAhead(label, text, future, priority, copy_runner)

    def take_copy(self, folder: Path, label: str, text: str) -> tuple[Future[Attempt], VariantRunner] | None:
        """The run `copy_ahead` started for this copy, from now on at normal priority; None where there is none.
        One of another copy in `folder` is stopped, and ended, before the folder is written again."""
        held = self._copies_ahead.pop(folder, None)
        if held is None:
            return None
        if (held.label, held.text) == (label, text):
            held.priority.urgent()
            return held.future, held.runner
        self._drop(held)
        return None

    def drop_ahead(self) -> None:
        """The runs started `ahead` (and `copy_ahead`) that no step asked for are not wanted: stopped."""
        for future, _ in self._ahead.values():
            self.stop(future)
        self._ahead.clear()
        for held in self._copies_ahead.values():
            self._drop(held)
        self._copies_ahead.clear()

    def _drop(self, held: _CopyAhead) -> None:
        self.stop(held.future)
        with suppress(CancelledError, Exception):
            held.future.result()  # its child ended: its folder is free
        held.runner.release()

    def _copy_runner(self, folder: Path, text: str, step: str | None = None) -> VariantRunner:
        """A runner of `text` written as a copy of the script in `folder`, counting its runs in this one's `made`."""
        call = self.call
        copy = write_copy(call.script, folder, text)
        return VariantRunner(ScriptCall(copy, call.args, folder, call.timeout_s, copy_env(call.script, call.env)),
                             1, self.reporter, step or self.current_step(), self.made, self.forking)

    def _submit(self, variant: Variant, priority: launch.Priority | None = None,
                pool: ThreadPoolExecutor | None = None, ahead: bool = True) -> Future[Attempt]:
        """`ahead`: a run given a `priority` was started before the step that takes it asked (`attempts[].ahead`)."""
        self._submitted += 1
        unwanted = threading.Event()
        ahead = ahead and priority is not None
        future = (pool or self._pool).submit(self._run, variant, unwanted, self.current_step(), priority, ahead)
        self._unwanted[future] = unwanted
        return future

    def stop(self, future: Future[Attempt]) -> None:
        """That run is not wanted: it never starts, or is terminated if it is running; it reports nothing."""
        future.cancel()
        self._unwanted[future].set()

    def run_dir(self, label: str) -> Path:
        """Where the run `label` keeps its sidecar and recording: for a job, the rank it stands for."""
        return self._rank_dirs.get(label, self._launch_dir(label))

    def _launch_dir(self, label: str) -> Path:
        return self.call.out_dir / "runs" / label

    @property
    def closed(self) -> bool:
        """No run of this runner is wanted any more (`close`): the diagnosis is ending."""
        return self._closed.is_set()

    def close(self) -> None:
        """No run is wanted any more: queued ones never start, running ones (and one starting
        right now) are terminated, and none reports progress after this."""
        self._closed.set()
        for unwanted in self._unwanted.values():
            unwanted.set()
        for pool in (self._pool, self._ahead_pool):
            pool.shutdown(wait=False, cancel_futures=True)
        stop_all(signal.SIGTERM)

    def wait_ended(self, timeout_s: float) -> None:
        """After `close`: wait, at most `timeout_s`, for the runs it terminated to end, so that each is in `made`
        (a stopped run's seconds were spent; on a loaded machine a terminated child takes a while to go)."""
        wait(list(self._unwanted), timeout=timeout_s)

    def release(self) -> None:
        """Every run of this runner has ended: free its threads. Unlike `close`, nothing is stopped (`stop_all`
        would end the children of every runner in the process, the diagnosis's own among them)."""
        for pool in (self._pool, self._ahead_pool):
            pool.shutdown(wait=False)

    def options(self, variant: Variant, unwanted: threading.Event | None = None,
                priority: launch.Priority | None = None) -> RunOptions:
        """How `variant` is run: what its child installs (`Hooks`) and where its run directory is."""
        overrides = variant.overrides
        if variant.timed:
            times = str((self._launch_dir(variant.label) / CALL_TIMES).resolve())
            overrides = msgspec.structs.replace(overrides or Overrides(), time_calls=times)
        anew = not variant.user_autotuning
        # an exported program's result is judged in the run
        hooks = Hooks(overrides=overrides, export_checks=True, autotune_anew=anew)
        if variant.record:  # a failure is expected: every after-AOT graph, cache or not, and the failing frame
            hooks = Hooks(overrides=overrides, export_checks=True, autotune_anew=anew,
                          frame_record_dir=str(self._launch_dir(variant.label) / "frames"),
                          record_every_aot_graph=True, record_keeps_aot_cache=variant.keeps_aot_cache,
                          record_accuracy_tolerance=variant.accuracy_tolerance,
                          record_run_eagerly=variant.run_eagerly, kernel_check=variant.kernel_check)
        return RunOptions(
            script=self.call.script, args=self.call.args, out_dir=self._launch_dir(variant.label),
            timeout_s=variant.timeout_s or self.call.timeout_s, record_graphs=variant.record, hooks=hooks,
            env={**self.call.env, **variant.env}, echo=False, label=variant.label,
            cancelled=unwanted if unwanted is not None else self._closed, torchrun=self.call.torchrun,
            forks=self.forking.for_run(variant.fork_control, variant.user_autotuning), priority=priority,
        )

    def _run(self, variant: Variant, unwanted: threading.Event, step: str, priority: launch.Priority | None,
             ahead: bool = False) -> Attempt:
        attempt = self._made(variant, unwanted, step, priority, ahead)
        if attempt.forked and not variant.fork_control and not unwanted.is_set() and not self.forking.vouched():
            self.reporter.status(f"run {variant.label}: forked before the control, which then ended otherwise than "
                                 "the first run: made again anew")
            attempt = self._made(variant, unwanted, step, priority, ahead)  # forking is off (`Forking.for_run`)
        if unwanted.is_set():  # stopped because it is not wanted: not a result to report
            return attempt
        self.finished[variant.label] = attempt
        on = f" (first on {attempt.rank})" if attempt.rank is not None else ""
        said = "passed" if attempt.outcome == "pass" else f"failed{on}: {attempt.error[:160]}"
        self.reporter.status(f"run {variant.label}: {said} ({attempt.wall_s:.1f}s; {_runs(self._finished)} done)")
        return attempt

    def _made(self, variant: Variant, unwanted: threading.Event, step: str, priority: launch.Priority | None,
              ahead: bool = False) -> Attempt:
        """One run of `variant`, counted in `made`."""
        options = self.options(variant, unwanted, priority)
        if unwanted.is_set():
            raise CancelledError(variant.label)
        rank = None
        with self.gpu.slot():
            if unwanted.is_set():
                raise CancelledError(variant.label)
            low = priority is not None and priority.background
            how = (", ahead, at low priority" if ahead else ", at low priority") if low else ""
            self.reporter.status(f"run {variant.label}: started ({_runs(self._finished)} done so far{how})")
            if self.call.torchrun is None:
                session = enrich(run_script(options))
            else:
                ran = run_job(options)
                job = job_of(ran.processes, ran.command, ran.exit)
                self.jobs[variant.label] = job
                rank, session = _standing_rank(job)
                self._rank_dirs[variant.label] = Path(session.run_dir or options.out_dir)
                save(session, Path(session.run_dir or options.out_dir) / "session.json")  # the rank's own
            self.gpu.learn(session)
        self.sessions[variant.label] = session
        self._finished += 1
        attempt = replace(attempt_of(variant, session, rank), step=step, ahead=ahead)
        self.made.append(RunMade(step, variant.label, attempt.wall_s, not unwanted.is_set()))
        return attempt


def _runs(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"


def _standing_rank(job: Job) -> tuple[str | None, Session]:
    """The rank a job's run stands for, and its session: the one whose failure ended first; else the
    first rank with a failure (one that failed without a sidecar saying when); else no rank, with rank 0's
    session (nothing failed)."""
    failed = [p for p in job.processes if p.session.failures]
    process = next((p for p in job.processes if p.label == job.first_failure), failed[0] if failed else None)
    if process is not None:
        return process.label, process.session
    if job.processes:
        return None, job.processes[0].session
    # torchrun started no rank: the job's own exit is all there is
    return None, Session(schema=SCHEMA, torch_version=None, command=job.command, exit=job.exit)


def attempt_of(variant: Variant, session: Session, rank: str | None = None) -> Attempt:
    sig = signature(session)
    verdict = verdict_for(session)
    failure = session.failures[0] if session.failures else None
    caught = caught_compile_failure(session.failures)
    error = ""
    if sig is not None:
        error = described(failure) if failure else sig
    if sig is not None and failure is not None and caught is not None:
        error = f"{described(caught)} (the script caught it and reported {described(failure)})"
    return Attempt(
        label=variant.label, backend=variant.backend, outcome="pass" if sig is None else "fail", signature=sig,
        category=verdict.category if sig is not None else None,
        exit_code=verdict.exit_code, wall_s=round(session.wall_s or 0.0, 3), run_dir=session.run_dir or "",
        error=error, rank=rank, forked=session.extras.forked,
    )


def run_a_copy(runner: VariantRunner, folder: Path, label: str, text: str) -> tuple[Attempt, VariantRunner]:
    """Run `text` as a copy of the script, in `folder` (never the user's file): with the script's directory
    first on PYTHONPATH, so its imports resolve as before, its argv and environment; the run `copy_ahead` started
    for it where there is one. Returns the run and the runner that made it (its `sessions` and `run_dir`)."""
    held = runner.take_copy(folder, label, text)
    if held is None:
        copy_runner = runner._copy_runner(folder, text)
        future = copy_runner.submit(Variant(label, timed=True))
    else:
        future, copy_runner = held
    try:
        return future.result(), copy_runner
    finally:
        copy_runner.release()


@dataclass(frozen=True, slots=True)
class _CopyAhead:
    """A run of a copy of the script started ahead (`VariantRunner.copy_ahead`)."""

    label: str
    text: str
    future: Future[Attempt]
    priority: launch.Priority
    runner: VariantRunner

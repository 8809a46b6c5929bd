"""Run a user's script in a child interpreter with structured tracing on, and survive whatever it does.

Contract: `run_script(options, reporter)` always returns a `Session`, also when the script raises,
exits non-zero, aborts, segfaults, hangs past the timeout or is interrupted with Ctrl-C; it writes
`session.json` and keeps the raw trace in `options.out_dir`. It does not classify failures or
advise (that is analysis): the session it returns holds facts only, with `Category.UNCLASSIFIED`.
The child runs in its own process group so a timeout can end it and every compile worker it started.
Several runs may go on at once (one per thread, as `diagnose` does); with `echo=False` a run's
output goes to `stdout.txt`/`stderr.txt` in its directory instead of the terminal, and
`stop_all()` ends every child still running (the caller's Ctrl-C). The child is told what to do
by one `ChildSpec` file in the run directory (`child-spec.json`, `model.child`): the sidecar's
path, the crash log, the timeout, the recorder's directory and the caller's `hooks`.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

from pt2doctor.capture import process_meta, run_lock
from pt2doctor.capture.collectives import read_rank
from pt2doctor.capture.trace.session_builder import build_session
from pt2doctor.capture.trace.trace_reader import TraceCounters, rank_of, read_trace, trace_files
from pt2doctor.model import SCHEMA, ExitInfo, Extras, Session, TraceStats
from pt2doctor.model.child import ChildSpec, Hooks
from pt2doctor.model.export import ExportEvent
from pt2doctor.model.export_draft import DraftReport, ExportCheck
from pt2doctor.model.job import JOB_SCHEMA, Job, ProcessSession
from pt2doctor.model.serialize import dumps, write_record
from pt2doctor.processes import launch

_STDERR_TAIL = 64 * 1024
_POLL_S = 0.25  # how soon a run that is no longer wanted is stopped


class Reporter(Protocol):
    """Where progress goes; the CLI hands in a terminal one, tests a silent one."""

    def status(self, text: str) -> None: ...


class SilentReporter:
    def status(self, text: str) -> None:
        return None


class ScriptError(Exception):
    """The script cannot be run at all (missing, a directory, unreadable): a usage error."""


@dataclass(frozen=True, slots=True)
class RunOptions:
    script: Path
    args: tuple[str, ...] = ()
    out_dir: Path = Path("pt2doctor-runs/latest")
    timeout_s: float | None = None
    record_graphs: bool = False
    torchrun: tuple[str, ...] | None = None  # run as a job through torch.distributed.run, with these flags
    hooks: Hooks = field(default_factory=Hooks)  # what the child installs besides the trace and the recorder
    env: Mapping[str, str] = field(default_factory=dict)
    stdout_to_stderr: bool = False
    strict: bool = False
    label: str = "run"
    echo: bool = True
    cancelled: threading.Event | None = None  # once set, the run is not wanted: a child starting then is stopped
    # a warm interpreter the child may be forked from instead of started anew, where it starts the same there
    # (`processes.fresh_forks`; never a job's, never one whose output is echoed)
    forks: launch.ModuleStarter | None = None
    priority: launch.Priority | None = None  # the child's scheduling priority (background work), else normal

    def __post_init__(self) -> None:
        # absolute: the child is handed paths under it, and a script may change its working directory
        object.__setattr__(self, "out_dir", Path(self.out_dir).absolute())


def check_script(script: Path) -> None:
    if not script.exists():
        raise ScriptError(f"no such script: {script}")
    if script.is_dir():
        raise ScriptError(f"{script} is a directory; give the Python script to run")
    if not os.access(script, os.R_OK):
        raise ScriptError(f"{script} is not readable")


def run_script(options: RunOptions, reporter: Reporter | None = None) -> Session:
    reporter = reporter or SilentReporter()
    check_script(options.script)
    with run_lock.claim(options.out_dir):
        return _run(options, reporter)


def _run(options: RunOptions, reporter: Reporter) -> Session:
    paths, ended = _launch(options, reporter)
    session = assemble(paths, options, *ended)
    save(session, paths.session)
    return session


def run_job(options: RunOptions, reporter: Reporter | None = None) -> Job:
    """The script as a job (torch.distributed.run with `options.torchrun`'s flags): one session per rank,
    each from its own trace, sidecar and crash stack, with the collectives it issued (`capture.collectives`)."""
    reporter = reporter or SilentReporter()
    check_script(options.script)
    with run_lock.claim(options.out_dir):
        paths, ended = _launch(options, reporter)
        ranks = sorted({r for r in map(rank_of, trace_files(paths.trace_dir) if paths.trace_dir.exists() else [])
                        if r is not None} | _ranks_with_sidecar(paths))
        exit_info = ended[0]
        processes = tuple(ProcessSession(f"rank {r}", r, None, assemble(
            paths.of_rank(r), options, _rank_exit(paths.of_rank(r), exit_info), *ended[1:],
            trace=_trace_of_rank(paths, r)), _ended_at(paths.of_rank(r)), read_rank(paths.of_rank(r))) for r in ranks)
        job = Job(JOB_SCHEMA, (str(options.script), *options.args), exit_info, processes)
        save(job, paths.session)
        return job


def _launch(options: RunOptions,
            reporter: Reporter) -> tuple[process_meta.RunPaths, tuple[ExitInfo, str, float, float, bool]]:
    paths = process_meta.RunPaths(options.out_dir)
    paths.clear()
    write_record(paths.spec, child_spec(options, paths))
    child = ("pt2doctor.capture.child", "--spec", str(paths.spec), str(options.script), *options.args)
    launcher = ("torch.distributed.run", *options.torchrun, "-m") if options.torchrun is not None else ()
    ranks = f" with torchrun {shlex.join(options.torchrun)}" if options.torchrun is not None else ""
    reporter.status(f"running {shlex.join([str(options.script), *options.args])}{ranks}")
    started = time.time()
    env = _child_env(options, paths)
    forked = _forked(child, env, options)
    if forked is not None:
        exit_info, stderr_tail = _supervise_fork(forked, options)
    else:
        exit_info, stderr_tail = _supervise((sys.executable, "-m", *launcher, *child), env, options)
    wall = time.time() - started
    reporter.status("reading the trace")
    return paths, (exit_info, stderr_tail, started, wall, forked is not None)


def _forked(child: tuple[str, ...], env: dict[str, str], options: RunOptions) -> launch.Stoppable | None:
    """The child forked from `options.forks`, where it starts there as in a new interpreter; else None."""
    forks = options.forks
    if forks is None or options.torchrun is not None or options.echo or not forks.forks_for(env):
        return None
    return forks.start_module(child[0], child[1:], env=env, cwd=Path.cwd(), out=options.out_dir / "stdout.txt",
                              err=options.out_dir / "stderr.txt")


def _ranks_with_sidecar(paths: process_meta.RunPaths) -> set[int]:
    return {int(d.name.split("-", 1)[1]) for d in paths.root.glob("rank-*") if d.name.split("-", 1)[1].isdigit()}


def _rank_exit(paths: process_meta.RunPaths, job_exit: ExitInfo) -> ExitInfo:
    """How one rank ended: its own exit code when it lived to write it, the signal it died of where its crash
    stack names one, else as the job ended (stopped at the timeout, interrupted, or killed with the others
    when one rank failed)."""
    meta = process_meta.read_meta(paths)
    if meta is not None and not job_exit.timed_out:
        return ExitInfo(code=meta.exit_code)
    # a rank that died of a signal (gloo aborts a rank that receives a collective of another size) says so in
    # its crash stack; torchrun's own status is the job's
    died = process_meta.fatal_signal(paths) if meta is None else None
    return ExitInfo(code=None, signal=died) if died is not None and not job_exit.timed_out else job_exit


def _ended_at(paths: process_meta.RunPaths) -> float | None:
    meta = process_meta.read_meta(paths)
    return meta.ended_at if meta is not None else None


def _trace_of_rank(paths: process_meta.RunPaths, rank: int) -> Path | None:
    files = [f for f in trace_files(paths.trace_dir) if rank_of(f) == rank] if paths.trace_dir.exists() else []
    return files[0] if files else None


def child_spec(options: RunOptions, paths: process_meta.RunPaths) -> ChildSpec:
    return ChildSpec(
        meta=str(paths.meta), crash_log=str(paths.faulthandler), timeout_s=options.timeout_s,
        # the recorder writes graphs/ in the run directory, where `minify DIR` reads
        record_dir=str(paths.root) if options.record_graphs else None, count_calls=True, hooks=options.hooks,
        per_rank=options.torchrun is not None, launched_at=time.time(), export_log=str(paths.export_log),
        draft_log=str(paths.draft_log) if options.hooks.draft_export else None,
        checks_log=str(paths.export_checks) if options.hooks.export_checks else None,
        line_buffered_stdout=options.echo and options.stdout_to_stderr and sys.stderr.isatty(),
    )


def _child_env(options: RunOptions, paths: process_meta.RunPaths) -> dict[str, str]:
    env = dict(os.environ)
    env.update(options.env)
    env["TORCH_TRACE"] = str(paths.trace_dir)
    return with_package_path(env)


def with_package_path(env: dict[str, str]) -> dict[str, str]:
    """`env` with pt2doctor's source first on PYTHONPATH, so a child finds it even if not installed."""
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    return env


_LIVE: set[launch.Stoppable] = set()  # every run's process, started anew or forked
_STOPPED: set[int] = set()
_LIVE_LOCK = threading.Lock()


def stop_all(first: signal.Signals = signal.SIGINT) -> None:
    """Stop every child still running (Ctrl-C in a caller that runs several at once), asking with
    `first`: SIGINT lets a script see KeyboardInterrupt; SIGTERM ends one whose result nobody wants
    at once (SIGINT waits out a script busy importing torch)."""
    with _LIVE_LOCK:
        live = list(_LIVE)
        _STOPPED.update(proc.pid for proc in live)
    for proc in live:
        launch.stop(proc, first)


def _supervise(command: tuple[str, ...], env: dict[str, str], options: RunOptions) -> tuple[ExitInfo, str]:
    # the script's output files: open while it runs, closed once it has ended (below)
    echo = sys.stderr.buffer if options.echo else open(options.out_dir / "stderr.txt", "wb")  # noqa: SIM115
    kept = open(options.out_dir / "stdout.txt", "wb") if not options.echo or options.stdout_to_stderr else None  # noqa: SIM115
    # stdout goes to the terminal as it is, or to our stderr (our stdout holds JSON) and is kept in stdout.txt
    # too: merged into the stream of the script's warnings, what it printed could no longer be told apart
    stdout = subprocess.PIPE if options.echo and options.stdout_to_stderr else kept
    proc = launch.start(command, env=env, stdout=stdout, stderr=subprocess.PIPE)
    tail = _Tail(echo)
    pumps = [threading.Thread(target=tail.pump, args=(proc.stderr,), daemon=True)]
    if stdout is subprocess.PIPE:
        pumps.append(threading.Thread(target=_Tail(sys.stderr.buffer, kept).pump, args=(proc.stdout,), daemon=True))
    for pump in pumps:
        pump.start()
    exit_info = _watched(proc, options)
    for pump in pumps:
        pump.join(timeout=launch.GRACE_S)
    for handle in (kept, echo):
        if handle is not None and handle is not sys.stderr.buffer:
            handle.close()
    return exit_info, tail.text()


def _supervise_fork(proc: launch.Stoppable, options: RunOptions) -> tuple[ExitInfo, str]:
    """A forked child writes its output to the run directory's files itself; the tail is read from its stderr."""
    exit_info = _watched(proc, options)
    with open(options.out_dir / "stderr.txt", "rb") as err:
        err.seek(max(0, err.seek(0, os.SEEK_END) - _STDERR_TAIL))
        return exit_info, err.read().decode("utf-8", "replace")


def _watched(proc: launch.Stoppable, options: RunOptions) -> ExitInfo:
    """Wait for `proc` (stopped at the timeout, or once no longer wanted) and say how it ended."""
    if options.priority is not None:
        options.priority.watch(proc.pid)
    with _LIVE_LOCK:
        _LIVE.add(proc)
        unwanted = options.cancelled is not None and options.cancelled.is_set()  # set before stop_all ran
        if unwanted:
            _STOPPED.add(proc.pid)
    if unwanted:
        launch.stop(proc, signal.SIGTERM)
    timed_out = interrupted = False
    try:
        timed_out = not _wait(proc, options)
        if timed_out:
            launch.stop(proc, signal.SIGTERM)
    except KeyboardInterrupt:
        interrupted = True
        launch.stop(proc, signal.SIGINT)
    finally:
        with _LIVE_LOCK:
            _LIVE.discard(proc)
            interrupted = interrupted or proc.pid in _STOPPED
    code = proc.returncode
    sig = -code if code is not None and code < 0 else None
    return ExitInfo(code=None if sig else code, signal=sig, timed_out=timed_out, interrupted=interrupted)


def _wait(proc: launch.Stoppable, options: RunOptions) -> bool:
    """Wait for the child; False at the timeout. A run no longer wanted (`options.cancelled`) is stopped."""
    deadline = None if options.timeout_s is None else time.monotonic() + options.timeout_s
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return False
        try:
            proc.wait(timeout=_POLL_S if left is None else min(left, _POLL_S))
            return True
        except subprocess.TimeoutExpired:
            if options.cancelled is not None and options.cancelled.is_set():
                with _LIVE_LOCK:
                    _STOPPED.add(proc.pid)
                launch.stop(proc, signal.SIGTERM)
                return True


class _Tail:
    """Tee a stream of the child's to `outs` (ours, a file) while keeping its last bytes for classification."""

    def __init__(self, *outs: IO[bytes] | None) -> None:
        self._outs = [out for out in outs if out is not None]
        self._chunks: list[bytes] = []
        self._size = 0

    def pump(self, stream: IO[bytes] | None) -> None:
        if stream is None:
            return
        # a Popen pipe is a BufferedReader (it has read1), though typeshed types it IO[bytes]
        for chunk in iter(lambda: stream.read1(65536), b""):  # type: ignore[attr-defined]
            for out in self._outs:
                try:
                    out.write(chunk)
                    out.flush()
                except (OSError, ValueError):
                    pass
            self._chunks.append(chunk)
            self._size += len(chunk)
            while self._size > _STDERR_TAIL and len(self._chunks) > 1:
                self._size -= len(self._chunks.pop(0))

    def text(self) -> str:
        return b"".join(self._chunks)[-_STDERR_TAIL:].decode("utf-8", "replace")


def assemble(paths: process_meta.RunPaths, options: RunOptions, exit_info: ExitInfo, stderr_tail: str,
             started: float, wall: float, forked: bool = False, *, trace: Path | None = None) -> Session:
    """The session of the process whose sidecar is in `paths`, from `trace` (default: `paths.trace_dir`); `forked`:
    the process was forked from a warm interpreter (`RunOptions.forks`)."""
    counters = TraceCounters()
    trace = trace if trace is not None else paths.trace_dir
    facts = build_session(read_trace(trace, counters, strict=options.strict)) if trace.exists() else build_session(())
    meta = process_meta.read_meta(paths)
    failures = process_meta.failures(meta, exit_info, facts.compile_failures, paths, options.timeout_s)
    environment = process_meta.environment(meta, facts.torch_version)
    torch_imported = meta.torch_imported if meta is not None else bool(facts.compiles)
    return Session(
        schema=SCHEMA, torch_version=environment.torch or facts.torch_version,
        command=(str(options.script), *options.args), exit=exit_info,
        compiles=tuple(process_meta.with_calls(facts.compiles, meta.calls if meta is not None else None)),
        graph_breaks=tuple(process_meta.with_code(process_meta.settle_fatal(facts.graph_breaks, failures))),
        recompiles=tuple(facts.recompiles),
        failures=tuple(failures), limit_hits=tuple(facts.limit_hits), cwd=os.getcwd(), started_at=started,
        wall_s=wall, trace=_trace_stats(counters), environment=environment, stderr_tail=stderr_tail,
        run_dir=str(paths.root), extras=Extras(torch_imported=torch_imported, forked=forked),
        export_steps=tuple(process_meta.records(paths.export_log, ExportEvent)),
        export_drafts=tuple(process_meta.records(paths.draft_log, DraftReport)),
        export_checks=tuple(process_meta.records(paths.export_checks, ExportCheck)),
        graph_execution=facts.graph_execution or process_meta.call_order(meta),
    )


def _trace_stats(c: TraceCounters) -> TraceStats:
    return TraceStats(files=tuple(c.files), lines=c.lines, events=c.events, unreadable=c.unreadable,
                      unknown=c.unknown, ranks=tuple(sorted(c.ranks)))


def save(session: Session | Job, path: Path) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_bytes(dumps(session, pretty=True))
    os.replace(tmp, path)

"""The parent side of the worker pool: send candidate scripts to the zygote, collect results.

Contract: `WorkerPool.run(scripts)` returns one `RunResult` per script, in the order given,
whatever order the forked children finish in; `run_until(scripts, decided)` the same, but once `decided` says the
answers so far (None where none came yet) are all the caller needs, the rest are cancelled (`protocol.Cancel`: a
forked child is ended) and stay None, and an answer of theirs that arrives later is dropped. The zygote
(`processes.zygote`) is started at construction and warms up while the caller prepares its first batch; `run`
waits for it. The pool is a context manager; closing it (or Ctrl-C, or the parent dying) ends the zygote and its
children. `servers=True` makes it run candidates in warm servers (the GPU way, `processes.zygote`)
without importing torch itself. `on_ready` is called once the zygote is warm (the verifier starts its own warm-up
then). With `fork=True` the zygote is forked from this process instead of started as a new
interpreter, so a parent that has already imported torch saves the zygote that import (~1-2 s of
CPU, which on a few busy cores is wall time); fork only from a process with no threads running
and no CUDA context, i.e. before anything but imports has happened. With `host` (a `FreshForks` server, which
imports torch, Dynamo and Inductor and probes the CPU, no GPU visible) the zygote is forked there once it is ready,
its pipes handed over: it imports nothing and probes nothing again (in a diagnosis, one interpreter's warm-up of
about 5 CPU-seconds less, beside the first run on a few cores); where the server cannot fork it, it starts as a
new interpreter on the same pipes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pt2doctor.capture.bytecode_cache import worker_env
from pt2doctor.model.settings import settings
from pt2doctor.processes import group as process_group
from pt2doctor.processes import launch
from pt2doctor.processes.protocol import Answer, Cancel, Message, MessageReader, Quit, Ready, RunJob, Status, send
from pt2doctor.processes.servers import MAX_SERVERS
from pt2doctor.processes.zygote import serve_forked

if TYPE_CHECKING:
    from pt2doctor.processes.fresh_forks import FreshForks


@dataclass(frozen=True, slots=True)
class RunResult:
    status: Status
    text: str = ""


class WorkerPoolError(RuntimeError):
    pass




class WorkerPool:
    def __init__(self, jobs: int, timeout_s: float, *, env: dict[str, str] | None = None, fork: bool = False,
                 servers: bool = False, on_ready: Callable[[], None] | None = None,
                 repro_file: str = "repro.py", host: FreshForks | None = None) -> None:
        self.jobs = max(1, min(jobs, MAX_SERVERS) if servers else jobs)  # candidates run at once
        self._on_ready = on_ready
        self.timeout_s = timeout_s
        self.repro_file = repro_file  # each candidate's `__file__`: where the repro will be written
        debug = settings().minify_debug
        self._proc: launch.Stoppable | None = None
        self._pid = -1
        self._lock = threading.Lock()  # `_pid` set by `_start_on`, `_closed` by `close`
        self._closed = False
        argv = ["pt2doctor.processes.zygote", str(self.jobs), *(["--servers"] if servers else [])]
        # the candidates' OpenMP threads sleep rather than spin while they wait (`launch.PASSIVE_WAIT`): they run
        # side by side with each other and with the program's runs (GPT-2's stage ladder: 5.3-5.4 s, against 5.8-6.1 s
        # spinning); a zygote forked from the fresh-forks server keeps the server's policy (a diagnosis's: passive too)
        zygote_env = worker_env({**launch.PASSIVE_WAIT, **os.environ, **(env or {})})
        if fork:
            self._pid, self._request_fd, self._result_fd = _fork_zygote(self.jobs, quiet=not debug, env=env)
        elif host is not None and not servers:
            (ours_r, theirs_w), (theirs_r, ours_w) = os.pipe(), os.pipe()
            self._request_fd, self._result_fd = ours_w, ours_r
            threading.Thread(target=self._start_on, args=(host, argv, zygote_env, theirs_r, theirs_w, debug),
                             daemon=True, name="pt2doctor-zygote-start").start()
        else:
            popen = subprocess.Popen(
                [sys.executable, "-m", *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=None if debug else subprocess.DEVNULL, env=zygote_env)
            self._proc, self._pid = popen, popen.pid
            self._request_fd, self._result_fd = popen.stdin.fileno(), popen.stdout.fileno()  # type: ignore[union-attr]
        self._reader = MessageReader()
        self._inbox: list[Message] = []
        self._ready = False
        self._next_id = 0
        self._dropped: set[int] = set()  # cancelled jobs, whose answers may still come
        self.warm_up_s = 0.0

    def _start_on(self, host: FreshForks, argv: list[str], env: dict[str, str], stdin: int, stdout: int,
                  debug: bool) -> None:
        """The zygote forked on `host` once it is ready, given the pipes' other ends; where it cannot be, started as
        a new interpreter on them; where the pool was closed meanwhile, none (one forked as it closed is ended here).
        Our copies of those ends are closed once it has them: its exit is the end of the answers (`_receive`)."""
        try:
            err = Path(os.devnull) if not debug else host.cwd / "zygote.err"
            proc: launch.Stoppable | None = host.start_module(argv[0], argv[1:], env=env, cwd=Path.cwd(), out=err,
                                                              err=err, stdin=stdin, stdout=stdout)
            if proc is None and not self._closed:
                proc = subprocess.Popen([sys.executable, "-m", *argv], stdin=stdin, stdout=stdout,
                                        stderr=None if debug else subprocess.DEVNULL, env=env)
        finally:
            os.close(stdin)
            os.close(stdout)
        if proc is None:
            return
        with self._lock:
            self._proc, self._pid, closed = proc, proc.pid, self._closed
        if closed:
            with suppress(OSError):
                os.kill(proc.pid, 9)
            proc.wait()

    def _receive(self) -> Message:
        while not self._inbox:
            data = os.read(self._result_fd, 1 << 20)
            if not data:
                raise WorkerPoolError(f"worker exited with status {self._wait(10.0)}")
            self._inbox.extend(self._reader.feed(data))
        return self._inbox.pop(0)

    def wait_ready(self) -> None:
        if not self._ready:
            started = time.monotonic()
            message = self._receive()
            if not isinstance(message, Ready):
                raise WorkerPoolError(f"worker did not start: {message}")
            self._ready = True
            self.warm_up_s = time.monotonic() - started
            if self._on_ready is not None:
                self._on_ready()

    def run(self, scripts: Sequence[str]) -> list[RunResult]:
        return self.run_until(scripts, lambda _: False)  # type: ignore[return-value]  # every answer waited for

    def run_until(self, scripts: Sequence[str], decided: Callable[[list[RunResult | None]], bool]
                  ) -> list[RunResult | None]:
        self.wait_ready()
        ids = list(range(self._next_id, self._next_id + len(scripts)))
        self._next_id += len(scripts)
        try:
            for job_id, text in zip(ids, scripts):
                send(self._request_fd, RunJob(job_id, text, self.timeout_s, self.repro_file))
        except OSError as exc:  # the zygote ended (its pipe has no reader): the same end as an answer never coming
            raise WorkerPoolError(f"worker exited with status {self._wait(10.0)}") from exc
        results: dict[int, RunResult] = {}
        while len(results) < len(ids):
            answer = self._receive()
            if not isinstance(answer, Answer):
                raise WorkerPoolError(f"the worker sent {answer!r} where an answer was due")
            if answer.job in self._dropped:
                self._dropped.discard(answer.job)
                continue
            results[answer.job] = RunResult(answer.status, answer.text)
            so_far = [results.get(i) for i in ids]
            if len(results) < len(ids) and decided(so_far):
                unwanted = tuple(i for i in ids if i not in results)
                send(self._request_fd, Cancel(unwanted))
                self._dropped.update(unwanted)
                return so_far
        return [results[i] for i in ids]

    def close(self) -> None:
        if self._request_fd < 0:
            return
        with suppress(OSError):
            send(self._request_fd, Quit())
        if isinstance(self._proc, subprocess.Popen) and self._proc.stdin is not None:  # its pipe objects own the fds
            for stream in (self._proc.stdin, self._proc.stdout):
                stream.close()  # type: ignore[union-attr]
        else:
            os.close(self._request_fd)
            os.close(self._result_fd)
        self._request_fd = self._result_fd = -1
        with self._lock:
            self._closed = True
            if self._pid < 0:
                return  # not started yet (its host still warming up): `_start_on` ends it, or starts none
        # a zygote still warming up reads nothing before it is warm (seconds on a busy machine): not waited for
        if self._wait(10.0 if self._ready else 0.0) is None:
            with suppress(OSError):
                os.kill(self._pid, 9)
            self._wait(None)

    def _wait(self, timeout_s: float | None) -> int | None:
        """The zygote's exit status, waiting up to `timeout_s` (None: for ever); None if still running."""
        if self._proc is not None:
            try:
                return self._proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                return None
        if self._pid < 0:  # none was started (its host ended with the pool closed)
            return None
        try:
            return process_group.wait(self._pid, timeout_s)
        except ChildProcessError:  # already reaped (e.g. by a SIGCHLD handler in the host program)
            return -1

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _fork_zygote(jobs: int, *, quiet: bool, env: dict[str, str] | None) -> tuple[int, int, int]:
    """Fork the zygote from this process; returns (pid, request write fd, result read fd)."""
    request_r, request_w = os.pipe()
    result_r, result_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(request_w)
        os.close(result_r)
        serve_forked(jobs, request_r, result_w, quiet, env)
    os.close(request_r)
    os.close(result_w)
    return pid, request_w, result_r

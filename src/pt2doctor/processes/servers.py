"""The GPU way to run candidates: a few warm fresh interpreters ("servers"), reused, each candidate isolated.

A process that touched the CUDA driver cannot fork children that use it, and with a GPU build even
imports may (torch then marks forked children "bad"), so `processes.forks.Forks` cannot serve a
GPU. `Servers` (a `processes.dispatch.Dispatcher`, same protocol, same contract) starts JOBS (at most
`MAX_SERVERS`) interpreters (`python -m pt2doctor.processes.servers`), each in its own process group.
Contract:
- Each warms once (torch, Inductor, the CUDA context and a first Triton compile: `candidates.warm_up`)
  and then runs candidates one at a time, each in the interpreter as it was after the warm-up: the
  compiler configs, stance, `torch.compile` and the export entry points, the default dtype and grad
  mode, the working directory, `sys.argv`, `sys.path` and `__main__` restored and Dynamo reset before
  each, so nothing one candidate
  set (a program candidate's `set_stance("force_eager")`, say) is seen by the next; what a candidate held
  (its module, the GPU memory the caching allocator keeps) is released before the answer is sent. A
  candidate that imported modules of the program's own (`_own_modules`: not the standard library's nor an
  installed package's) ends its server after answering: what those did on import cannot be undone, and a
  later candidate that no longer imports them must not see it.
- A server that crashes or hangs (killed at the candidate's timeout, with its process group) takes
  only its candidate with it and is replaced at once. A server whose candidate failed exits after
  answering unless CUDA is still usable (`torch.cuda.synchronize()`: a device-side assert poisons
  the context), so no candidate runs in a damaged process.
- A server not warm within `PT2DOCTOR_SERVER_WARM_UP_TIMEOUT` seconds (`model.settings`, default 600) is
  given up on; with none left, queries are
  answered `error` with the reason.
- `gpu_device_visible()` lets a parent choose servers before it imports torch.
"""

from __future__ import annotations

import gc
import os
import selectors
import site
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from pt2doctor.model.settings import settings
from pt2doctor.processes import launch
from pt2doctor.processes.dispatch import Dispatcher, run_guarded, warm_up
from pt2doctor.processes.group import kill_group
from pt2doctor.processes.protocol import Answer, MessageReader, Quit, Ready, RunJob, StartFailed, ended, send

# At most this many servers share a GPU. Measured on an H200 with 16 cores (bench/results/
# minify-gpu-*): minify took ~10 s with 4 or 8 servers and ~15 s with 16, whose warm-ups (CUDA
# contexts are created one after another) outlast the work; each also holds GPU memory.
MAX_SERVERS = 8


@dataclass(eq=False)
class _Server:
    proc: subprocess.Popen[bytes]
    reader: MessageReader = field(default_factory=MessageReader)
    ready: bool = False
    job: tuple[int, float] | None = None  # (job id, deadline)
    last: bool = False  # it said it exits after its answer: replaced once it has
    # A server not warm by then (a wedged driver, a hung first compile) is given up on, so a broken
    # GPU ends the minification with its reason instead of leaving every query waiting.
    warm_up_s: float = field(default_factory=lambda: settings().server_warm_up_timeout_s)
    warm_deadline: float = 0.0

    def __post_init__(self) -> None:
        self.warm_deadline = time.monotonic() + self.warm_up_s

    @property
    def deadline(self) -> float | None:
        """When it must have answered: its job's deadline, or while warming up, the warm-up's."""
        if self.job is not None:
            return self.job[1]
        return None if self.ready else self.warm_deadline


class Servers(Dispatcher):
    """Up to MAX_SERVERS warm fresh interpreters, each running one candidate at a time."""

    def __init__(self, jobs: int, out_fd: int) -> None:
        super().__init__(min(jobs, MAX_SERVERS), out_fd)
        self.servers: list[_Server] = []
        self.warm_failures: list[str] = []
        for _ in range(self.jobs):
            self._start()

    def _start(self) -> None:
        debug = settings().minify_debug
        proc = launch.start([sys.executable, "-m", "pt2doctor.processes.servers"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=None if debug else subprocess.DEVNULL)
        server = _Server(proc)
        self.servers.append(server)
        self.selector.register(proc.stdout, selectors.EVENT_READ, server)  # type: ignore[arg-type]

    def dispatch(self) -> None:
        for server in self.servers:
            if not self.pending:
                break
            if server.ready and server.job is None:
                job = self.pending.popleft()
                server.job = (job.job, time.monotonic() + job.timeout_s)
                with suppress(OSError):  # it died; its stdout's end of file answers the job
                    send(server.proc.stdin.fileno(), job)  # type: ignore[union-attr]
        if self.pending and not self.servers:  # every server failed to warm up: say why
            why = self.warm_failures[-1] if self.warm_failures else "no worker"
            while self.pending:
                self.answer(Answer(self.pending.popleft().job, "error", why))

    def wait_s(self) -> float | None:
        deadlines = [s.deadline for s in self.servers if s.deadline is not None]
        return max(0.0, min(deadlines) - time.monotonic()) if deadlines else None

    def readable(self, server: object) -> None:
        assert isinstance(server, _Server)
        data = os.read(server.proc.stdout.fileno(), 1 << 20)  # type: ignore[union-attr]
        if not data:
            self._retire(server, replace=server.ready or server.last)
            return
        for message in server.reader.feed(data):
            if isinstance(message, Ready):
                server.ready = True
            elif isinstance(message, StartFailed):
                self.warm_failures.append(message.why)
            elif isinstance(message, Answer):
                server.job = None
                server.ready, server.last = not message.last, message.last  # a last answer: no job is sent to it
                self.answer(message)

    def expire(self) -> None:
        now = time.monotonic()
        for server in list(self.servers):
            if not server.ready and server.warm_deadline <= now:
                self.warm_failures.append(f"a worker did not warm up in {server.warm_up_s:g} s")
                self._retire(server, replace=False)
            elif server.job is not None and server.job[1] <= now:
                job_id = server.job[0]
                server.job = None
                self._retire(server, replace=True)
                self.answer(Answer(job_id, "timeout"))

    def _retire(self, server: _Server, *, replace: bool) -> None:
        """Kill and reap `server`; answer its unfinished job; start another in its place."""
        self.servers.remove(server)
        self.selector.unregister(server.proc.stdout)  # type: ignore[arg-type]
        kill_group(server.proc.pid)  # may have been killed already (`shutdown`)
        status = server.proc.wait()
        for stream in (server.proc.stdin, server.proc.stdout):
            stream.close()  # type: ignore[union-attr]
        if server.job is not None:
            job_id = server.job[0]
            self.answer(ended(job_id, status))
        if replace:
            self._start()

    def shutdown(self) -> None:
        for server in self.servers:  # all at once: a process with a CUDA context takes a while to die
            kill_group(server.proc.pid)
        for server in list(self.servers):
            server.job = None
            self._retire(server, replace=False)


def _healthy() -> bool:
    """After a failed candidate: whether this server's CUDA context is still usable."""
    import torch

    if not torch.cuda.is_initialized():
        return True
    try:
        torch.cuda.synchronize()
    except Exception:
        return False
    return True


def serve_candidates(out_fd: int) -> None:
    """A server's life: warm up, then run the candidates read from stdin one at a time."""
    import torch

    from pt2doctor.capture.torch_compat import reset_dynamo, state_checkpoint

    try:
        warm_up("cuda" if torch.cuda.is_available() else "cpu")
    except Exception as exc:
        send(out_fd, StartFailed(f"{type(exc).__name__}: {exc}"[:2000]))
        return
    restore = _interpreter_checkpoint(state_checkpoint())
    modules = set(sys.modules)
    send(out_fd, Ready())
    reader = MessageReader()
    while data := os.read(0, 1 << 20):
        for message in reader.feed(data):
            if isinstance(message, Quit) or not isinstance(message, RunJob):
                return
            restore()
            reset_dynamo()
            status, text = run_guarded(message.script, message.repro_file)
            restore()
            _release(torch)
            last = (status != "ok" and not _healthy()) or bool(_own_modules(set(sys.modules) - modules))
            send(out_fd, Answer(message.job, status, text, last))
            if last:
                return


def _own_modules(imported: set[str]) -> list[str]:
    """The modules a candidate imported that are the program's own (not the standard library's nor an installed
    package's): what they did on import (a patch to torch, a registration) stays in this interpreter, and a
    later candidate that no longer imports them would still see it, so the server is not reused."""
    ours = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # pt2doctor's, however it is installed
    installed = tuple({sys.prefix, sys.base_prefix, *site.getsitepackages(), site.getusersitepackages(), ours})
    return [name for name in imported if (file := getattr(sys.modules.get(name), "__file__", None))
            and not os.path.abspath(file).startswith(installed)]


def _release(torch: Any) -> None:
    """What the candidate held, released before the next one runs: its module (functions and their globals
    are a reference cycle, freed only by the collector) and the GPU memory the caching allocator keeps for
    reuse, so that a program that holds most of the GPU runs again in this server."""
    gc.collect()
    if torch.cuda.is_initialized():
        with suppress(Exception):  # a damaged context: `_healthy` decides what happens to this server
            torch.cuda.empty_cache()


def _interpreter_checkpoint(restore_torch: Callable[[], None]) -> Callable[[], None]:
    """`restore_torch` plus the interpreter state a program candidate changes to run as `python SCRIPT`
    would (`reduce.program_harness`): working directory, argv, import path, `__main__`."""
    cwd, argv, path, main = os.getcwd(), list(sys.argv), list(sys.path), sys.modules["__main__"]

    def restore() -> None:
        restore_torch()
        os.chdir(cwd)
        sys.argv[:], sys.path[:] = argv, path
        sys.modules["__main__"] = main

    return restore


def gpu_device_visible() -> bool:
    """Whether this machine shows processes a GPU (NVIDIA's or AMD's device files), asked without
    torch or a driver call, so a parent can choose `Servers` before it imports torch."""
    if os.environ.get("CUDA_VISIBLE_DEVICES") == "":
        return False
    return any(os.path.exists(path) for path in ("/dev/nvidiactl", "/dev/kfd"))


def main() -> None:
    out_fd = os.dup(1)
    os.dup2(2, 1)  # stray prints from torch must not corrupt the protocol
    serve_candidates(out_fd)
    os._exit(0)  # skip torch's interpreter teardown: the zygote waits for this exit


if __name__ == "__main__":
    main()

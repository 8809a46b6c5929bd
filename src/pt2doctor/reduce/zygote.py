"""The warm workers: import torch once, warm Inductor once, then run each candidate isolated.

Run as `python -m pt2doctor.reduce.zygote JOBS`, or forked from a parent that has already
imported torch (`serve_forked`, which saves the zygote its own `import torch`); spoken to only by
`reduce.pool.WorkerPool`.
Contract:
- Protocol: length-prefixed pickles on stdin/stdout. In: `("run", job_id, script_text, timeout_s,
  repro_file)` (where the repro will be written: the candidate's `__file__`) or `("quit",)`. Out: `("ready",)` once warm (or `("failed", why)` and exit), then `(job_id, status, text)` per job, where status
  is `ok`, `failed` (text: the script's `describe_failure`), `signal` (text: the number),
  `timeout` or `error` (a worker-side problem, never a match).
- Isolation, two ways, one contract: a crash, abort, hang (killed at its timeout, with any gcc it
  started) or OOM kills only that candidate. At most JOBS candidates run at once.
  - `Forks` (no GPU): each candidate runs in a child forked from the warm zygote, in its own
    process group. The zygote stays single-threaded (torch.set_num_threads(1), Inductor
    compile_threads=1) because forking a process with live OpenMP or compile-pool threads can
    deadlock the child.
  - `Servers` (a GPU, `reduce.servers`): a process that touched the CUDA driver cannot fork
    children that use it, so candidates run in warm reusable interpreters instead, under the
    same contract.
  `Servers` are used when the parent asks for them (`--servers`: it saw a GPU's device files and
  started this zygote without torch, so the servers' warm-up overlaps its own `import torch`),
  when torch sees a GPU, or when, after warming, a test fork shows its children would be bad.
- Stdin closing (the parent died) or a signal ends the zygote and kills its children.
"""

from __future__ import annotations

import os
import pickle
import selectors
import signal
import struct
import sys
import time
from collections import deque
from dataclasses import dataclass, field

from pt2doctor.capture import torch_compat

_HEADER = struct.Struct("!I")


def send(fd: int, message: object) -> None:
    data = pickle.dumps(message)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


class FrameReader:
    """Incremental decoder of length-prefixed pickles read from a non-blocking source."""

    def __init__(self) -> None:
        self.buffer = b""

    def feed(self, data: bytes) -> list[object]:
        self.buffer += data
        out = []
        while len(self.buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self.buffer)
            if len(self.buffer) < _HEADER.size + size:
                break
            out.append(pickle.loads(self.buffer[_HEADER.size:_HEADER.size + size]))
            self.buffer = self.buffer[_HEADER.size + size:]
        return out


def warm_up(device: str = "cpu") -> None:
    """Import and exercise Inductor once, so what runs candidates starts warm: Inductor imported
    with the CPU-ISA probe run beside the import (`torch_compat.prewarm_inductor`), then a tiny
    graph compiled with `compile_fx_inner` on `device` (`torch_compat.compile_tiny_graph`; on a GPU:
    the CUDA context and Triton's first compile). A zygote that forks children warms on CPU only, and must not initialize CUDA
    (`Forks`)."""
    import torch

    torch.set_num_threads(1)
    torch_compat.prewarm_inductor()
    torch_compat.compile_tiny_graph(device)


def run_candidate(text: str, repro_file: str = "repro.py") -> tuple[str, str]:
    """In the child: exec the repro script and run its `check()`."""
    # Where the repro will be written, so it finds files beside it (saved input values).
    namespace: dict[str, object] = {"__name__": "pt2doctor_candidate", "__file__": repro_file}
    exec(compile(text, "repro.py", "exec"), namespace)
    try:
        namespace["check"]()  # type: ignore[operator]
    except Exception as exc:
        return "failed", namespace["describe_failure"](exc)  # type: ignore[operator]
    return "ok", ""


def run_guarded(text: str, repro_file: str = "repro.py") -> tuple[str, str]:
    """`run_candidate`, with anything the script raises past its `check()` reported as an error."""
    try:
        return run_candidate(text, repro_file)
    except BaseException as exc:  # an exec'd script can raise anything; report, never hang
        return "error", f"{type(exc).__name__}: {exc}"[:500]


class Dispatcher:
    """What both ways (`Forks`, `servers.Servers`) share: jobs read from stdin into a queue,
    results written to the parent."""

    def __init__(self, jobs: int, out_fd: int) -> None:
        self.jobs = jobs
        self.out_fd = out_fd
        self.pending: deque[tuple[int, str, float, str]] = deque()  # (job id, script, timeout, repro file)
        self.selector = selectors.DefaultSelector()
        self.reader = FrameReader()

    def serve(self) -> None:
        self.selector.register(0, selectors.EVENT_READ, None)
        while True:
            self.dispatch()
            for key, _ in self.selector.select(self.wait_s()):
                if key.data is None and not self._read_requests():
                    return
                if key.data is not None:
                    self.readable(key.data)
            self.expire()

    def _read_requests(self) -> bool:
        data = os.read(0, 1 << 20)
        if not data:
            return False
        for message in self.reader.feed(data):
            if message[0] == "quit":
                return False
            self.pending.append(message[1:])
        return True

    def answer(self, job_id: int, status: str, text: str = "") -> None:
        send(self.out_fd, (job_id, status, text))

    # How candidates run, defined by `Forks` and `Servers`: start queued jobs; read what a
    # selector key's `data` (a child, a server) wrote; when the next deadline is; kill the overdue.
    def dispatch(self) -> None: ...
    def readable(self, data: object) -> None: ...
    def wait_s(self) -> float | None: ...
    def expire(self) -> None: ...
    def shutdown(self) -> None: ...


@dataclass
class _Child:
    job_id: int
    fd: int
    deadline: float
    chunks: list[bytes] = field(default_factory=list)


def _fork(job_id: int, text: str, timeout_s: float, repro_file: str) -> tuple[int, _Child]:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.setpgid(0, 0)
            os.close(read_fd)
            if not os.environ.get("PT2DOCTOR_MINIFY_DEBUG"):
                devnull = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(devnull, fd)
            os.write(write_fd, pickle.dumps(run_guarded(text, repro_file)))
        finally:
            os._exit(0)
    os.close(write_fd)
    return pid, _Child(job_id, read_fd, time.monotonic() + timeout_s)


def forks_poisoned() -> bool:
    """Whether children forked from this process could not use CUDA (see the module docstring)."""
    from pt2doctor.capture.torch_compat import cuda_fork_poisoned

    pid = os.fork()
    if pid == 0:
        os._exit(1 if cuda_fork_poisoned() else 0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) != 0


class Forks(Dispatcher):
    """One child forked from this warm process per candidate."""

    def __init__(self, jobs: int, out_fd: int) -> None:
        super().__init__(jobs, out_fd)
        self.children: dict[int, _Child] = {}

    def dispatch(self) -> None:
        while self.pending and len(self.children) < self.jobs:
            pid, child = _fork(*self.pending.popleft())
            self.children[pid] = child
            self.selector.register(child.fd, selectors.EVENT_READ, pid)

    def wait_s(self) -> float | None:
        if not self.children:
            return None
        return max(0.0, min(c.deadline for c in self.children.values()) - time.monotonic())

    def readable(self, pid: object) -> None:
        child = self.children[pid]  # type: ignore[index]
        data = os.read(child.fd, 1 << 16)
        if data:
            child.chunks.append(data)
            return
        _, status = self._reap(pid)  # type: ignore[arg-type]
        if child.chunks:
            self.answer(child.job_id, *pickle.loads(b"".join(child.chunks)))
        elif os.WIFSIGNALED(status):
            self.answer(child.job_id, "signal", str(os.WTERMSIG(status)))
        else:
            self.answer(child.job_id, "error", f"exit status {os.WEXITSTATUS(status)}")

    def expire(self) -> None:
        now = time.monotonic()
        for pid, child in list(self.children.items()):
            if child.deadline <= now:
                self._reap(pid)
                self.answer(child.job_id, "timeout")

    def _reap(self, pid: int) -> tuple[int, int]:
        child = self.children.pop(pid)
        self.selector.unregister(child.fd)
        os.close(child.fd)
        kill_group(pid)  # gcc or other grandchildren the candidate left behind
        return os.waitpid(pid, 0)

    def shutdown(self) -> None:
        for pid in list(self.children):
            self._reap(pid)


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _uses_servers() -> bool:
    """Servers where torch sees a GPU (asking poisons forks, but then nothing is forked)."""
    import torch

    return bool(torch.version.cuda or torch.version.hip) and torch.cuda.is_available()


def _serve(jobs: int, out_fd: int, servers: bool) -> None:
    """`servers`: the parent chose them; else choose here, warming up to fork if not."""
    try:
        if not servers and not (servers := _uses_servers()):
            warm_up("cpu")
            servers = forks_poisoned()
    except Exception as exc:  # tell the parent why, rather than dying silently
        send(out_fd, ("failed", f"{type(exc).__name__}: {exc}"[:2000]))
        return
    send(out_fd, ("ready",))
    if servers:
        from pt2doctor.reduce.servers import Servers

        dispatcher: Dispatcher = Servers(jobs, out_fd)
    else:
        dispatcher = Forks(jobs, out_fd)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        dispatcher.serve()
    except KeyboardInterrupt:
        pass
    finally:
        dispatcher.shutdown()


def main(argv: list[str]) -> int:
    """`JOBS [--servers]`; with `--servers` the zygote never imports torch itself."""
    out_fd = os.dup(1)
    os.dup2(2, 1)  # stray prints from torch must not corrupt the protocol
    _serve(int(argv[1]) if len(argv) > 1 else 1, out_fd, servers="--servers" in argv[2:])
    os._exit(0)  # skip torch's interpreter teardown (~1 s): the parent waits for this exit


def serve_forked(jobs: int, request_fd: int, out_fd: int, quiet: bool, env: dict[str, str] | None = None) -> None:
    """In a child just forked from the parent: serve requests from `request_fd`; never returns."""
    try:
        os.environ.update(env or {})
        os.dup2(request_fd, 0)
        if quiet:
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 2)
        os.dup2(2, 1)
        _serve(jobs, out_fd, servers=False)
    finally:
        os._exit(0)  # never run the parent's code (or its atexit handlers) in this process


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""The warm worker: import torch once, warm Inductor once, then fork one child per candidate.

Run as `python -m pt2doctor.reduce.zygote JOBS`, or forked from a parent that has already
imported torch (`serve_forked`, which saves the zygote its own `import torch`); spoken to only by
`reduce.pool.WorkerPool`.
Contract:
- Protocol: length-prefixed pickles on stdin/stdout. In: `("run", job_id, script_text, timeout_s)`
  or `("quit",)`. Out: `("ready",)` once warm (or `("failed", why)` and exit), then `(job_id, status, text)` per job, where status
  is `ok`, `failed` (text: the script's `describe_failure`), `signal` (text: the number),
  `timeout` or `error` (a worker-side problem, never a match).
- Isolation: each candidate runs in a forked child in its own process group, so a crash, abort,
  hang (killed at its timeout, with any gcc it started) or OOM kills only that candidate. At most
  JOBS children run at once.
- CUDA: a process that touched the CUDA driver cannot fork children that use it, and with a GPU
  build even imports may (torch then marks forked children "bad"). After warming up the zygote
  test-forks once; if its children would be bad (`torch_compat.cuda_fork_poisoned`), each
  candidate's child execs a fresh interpreter that runs the script (`_EXEC_RUNNER`): still one
  isolated process per candidate, still in parallel, without the warm start.
- The zygote stays single-threaded (torch.set_num_threads(1), Inductor compile_threads=1) because
  forking a process with live OpenMP or compile-pool threads can deadlock the child.
- Stdin closing (the parent died) or a signal ends the zygote and kills its children.
"""

from __future__ import annotations

import os
import pickle
import selectors
import signal
import struct
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field

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


def warm_up() -> None:
    """Import and exercise Inductor so children start warm, without initializing CUDA.

    A process that initialized CUDA cannot fork children that use it ("Cannot re-initialize CUDA
    in forked subprocess"), and any Inductor compile does when a GPU is present (Dynamo's
    `preserve_rng_state` saves the CUDA RNG state). Even `torch.cuda.is_available()` poisons
    forking (it initializes the driver to count devices). So with a GPU build of torch the zygote
    only imports (Inductor, its Triton backend, Triton) and asks the driver nothing. With a CPU build
    a tiny graph is compiled with `compile_fx_inner`, which also runs the one-off CPU ISA probe (~1 s)
    that children then inherit.
    """
    import torch

    torch.set_num_threads(1)
    import torch._dynamo
    import torch._inductor.config as inductor_config
    import torch.fx
    from torch._inductor.compile_fx import compile_fx_inner

    inductor_config.compile_threads = 1
    if torch.version.cuda or torch.version.hip:
        import torch._inductor.codegen.triton  # noqa: F401
        try:
            import triton  # noqa: F401
        except ImportError:
            pass
    else:
        aten = torch.ops.aten
        graph = torch.fx.symbolic_trace(lambda x: (aten.sin.default(aten.mul.Tensor(x, 2)),))
        compile_fx_inner(graph, [torch.randn(8)])
    if torch.cuda.is_initialized():
        raise RuntimeError("the zygote's warm-up initialized CUDA: its forked children could not use the GPU")


def run_candidate(text: str) -> tuple[str, str]:
    """In the child: exec the repro script and run its `check()`."""
    # Where the repro will be written, so it finds files beside it (saved input values).
    namespace: dict[str, object] = {"__name__": "pt2doctor_candidate",
                                    "__file__": os.environ.get("PT2DOCTOR_REPRO_FILE", "repro.py")}
    exec(compile(text, "repro.py", "exec"), namespace)
    try:
        namespace["check"]()  # type: ignore[operator]
    except Exception as exc:
        return "failed", namespace["describe_failure"](exc)  # type: ignore[operator]
    return "ok", ""


@dataclass
class _Child:
    job_id: int
    fd: int
    deadline: float
    chunks: list[bytes] = field(default_factory=list)


_EXEC_RUNNER = """\
import os, pickle, sys
from pt2doctor.reduce.zygote import run_candidate
with open(sys.argv[1]) as handle:
    text = handle.read()
os.unlink(sys.argv[1])
try:
    result = run_candidate(text)
except BaseException as exc:
    result = ("error", f"{type(exc).__name__}: {exc}"[:500])
os.write(int(sys.argv[2]), pickle.dumps(result))
os._exit(0)
"""


def _run_in_child(text: str, write_fd: int, exec_fresh: bool) -> None:
    if exec_fresh:
        handle, path = tempfile.mkstemp(prefix="pt2doctor-candidate-", suffix=".py")
        os.write(handle, text.encode())
        os.close(handle)
        os.set_inheritable(write_fd, True)
        os.execv(sys.executable, [sys.executable, "-c", _EXEC_RUNNER, path, str(write_fd)])
    try:
        result = run_candidate(text)
    except BaseException as exc:  # an exec'd script can raise anything; report, never hang
        result = ("error", f"{type(exc).__name__}: {exc}"[:500])
    os.write(write_fd, pickle.dumps(result))


def _fork(job_id: int, text: str, timeout_s: float, exec_fresh: bool = False) -> tuple[int, _Child]:
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
            _run_in_child(text, write_fd, exec_fresh)
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


class Zygote:
    def __init__(self, jobs: int, out_fd: int, exec_fresh: bool = False) -> None:
        self.jobs = jobs
        self.exec_fresh = exec_fresh
        self.out_fd = out_fd
        self.pending: deque[tuple[int, str, float]] = deque()
        self.children: dict[int, _Child] = {}
        self.selector = selectors.DefaultSelector()
        self.reader = FrameReader()

    def serve(self) -> None:
        self.selector.register(0, selectors.EVENT_READ, None)
        while True:
            while self.pending and len(self.children) < self.jobs:
                pid, child = _fork(*self.pending.popleft(), exec_fresh=self.exec_fresh)
                self.children[pid] = child
                self.selector.register(child.fd, selectors.EVENT_READ, pid)
            for key, _ in self.selector.select(self._wait_s()):
                if key.data is None and not self._read_requests():
                    return
                if key.data is not None:
                    self._read_child(key.data)
            self._expire()

    def _wait_s(self) -> float | None:
        if not self.children:
            return None
        return max(0.0, min(c.deadline for c in self.children.values()) - time.monotonic())

    def _read_requests(self) -> bool:
        data = os.read(0, 1 << 20)
        if not data:
            return False
        for message in self.reader.feed(data):
            if message[0] == "quit":
                return False
            self.pending.append(message[1:])
        return True

    def _read_child(self, pid: int) -> None:
        child = self.children[pid]
        data = os.read(child.fd, 1 << 16)
        if data:
            child.chunks.append(data)
            return
        _, status = self._reap(pid)
        if child.chunks:
            send(self.out_fd, (child.job_id, *pickle.loads(b"".join(child.chunks))))
        elif os.WIFSIGNALED(status):
            send(self.out_fd, (child.job_id, "signal", str(os.WTERMSIG(status))))
        else:
            send(self.out_fd, (child.job_id, "error", f"exit status {os.WEXITSTATUS(status)}"))

    def _expire(self) -> None:
        now = time.monotonic()
        for pid, child in list(self.children.items()):
            if child.deadline <= now:
                _kill_group(pid)
                self._reap(pid)
                send(self.out_fd, (child.job_id, "timeout", ""))

    def _reap(self, pid: int) -> tuple[int, int]:
        child = self.children.pop(pid)
        self.selector.unregister(child.fd)
        os.close(child.fd)
        _kill_group(pid)  # gcc or other grandchildren the candidate left behind
        return os.waitpid(pid, 0)

    def shutdown(self) -> None:
        for pid in list(self.children):
            _kill_group(pid)
            self._reap(pid)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _serve(jobs: int, out_fd: int) -> None:
    try:
        warm_up()
    except Exception as exc:  # tell the parent why, rather than dying silently
        send(out_fd, ("failed", f"{type(exc).__name__}: {exc}"[:2000]))
        return
    send(out_fd, ("ready",))
    exec_fresh = forks_poisoned() or bool(os.environ.get("PT2DOCTOR_MINIFY_EXEC"))  # the env: to test that path
    zygote = Zygote(jobs, out_fd, exec_fresh=exec_fresh)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        zygote.serve()
    except KeyboardInterrupt:
        pass
    finally:
        zygote.shutdown()


def main(argv: list[str]) -> int:
    out_fd = os.dup(1)
    os.dup2(2, 1)  # stray prints from torch must not corrupt the protocol
    _serve(int(argv[1]) if len(argv) > 1 else 1, out_fd)
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
        _serve(jobs, out_fd)
    finally:
        os._exit(0)  # never run the parent's code (or its atexit handlers) in this process


if __name__ == "__main__":
    sys.exit(main(sys.argv))

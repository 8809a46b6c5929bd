"""What runs a candidate, both ways (`processes.forks.Forks`, `processes.servers.Servers`): the warm-up,
running one candidate script, and the dispatcher that reads jobs and answers (`processes.protocol`).

Contract:
- `Dispatcher`: jobs read from stdin into a queue, at most JOBS running at once, answers written
  to the parent; its subclasses say how a candidate runs.
- `run_guarded` never raises: whatever the script does is one of the `Answer` statuses.
"""

from __future__ import annotations

import os
import selectors
from collections import deque

from pt2doctor.capture import torch_compat
from pt2doctor.processes.protocol import Answer, Cancel, MessageReader, RunJob, Status, send


def warm_up(device: str = "cpu") -> None:
    """Import and exercise Inductor once, so what runs candidates starts warm: Inductor imported
    with the CPU-ISA probe run beside the import (`torch_compat.prewarm_inductor`), then a tiny
    graph compiled with `compile_fx_inner` on `device` (`torch_compat.compile_tiny_graph`; on a GPU:
    the CUDA context and Triton's first compile). A zygote that forks children warms on CPU only, and must not
    initialize CUDA (`Forks`). Every candidate autotunes anew (`torch_compat.autotune_anew`): a kernel that an
    earlier candidate autotuned is tuned again, as in the run the repro stands for."""
    import torch

    global _FRESH_THREADS
    _FRESH_THREADS = torch.get_num_threads()
    torch.set_num_threads(1)
    torch_compat.autotune_anew()
    torch_compat.prewarm_inductor()
    torch_compat.compile_tiny_graph(device)


# The intra-op thread count torch picks in a fresh interpreter (the user's run's, the verifier's): a
# kernel that is wrong only when it runs in parallel (a race, a reduction split across threads) must
# be wrong in the candidates too. The warm process stays at one thread, so a forked child has no
# OpenMP pool to inherit and starts its own.
_FRESH_THREADS: int | None = None


def run_candidate(text: str, repro_file: str = "repro.py") -> tuple[Status, str]:
    """In the child: exec the repro script and run its `check()` with a fresh interpreter's threads."""
    if _FRESH_THREADS is not None:
        import torch

        torch.set_num_threads(_FRESH_THREADS)
    # Where the repro will be written, so it finds files beside it (saved input values).
    namespace: dict[str, object] = {"__name__": "pt2doctor_candidate", "__file__": repro_file}
    exec(compile(text, "repro.py", "exec"), namespace)
    try:
        namespace["check"]()  # type: ignore[operator]
    except Exception as exc:
        return "failed", namespace["describe_failure"](exc)  # type: ignore[operator]
    return "ok", ""


def run_guarded(text: str, repro_file: str = "repro.py") -> tuple[Status, str]:
    """`run_candidate`, with anything the script raises past its `check()` reported as an error."""
    try:
        return run_candidate(text, repro_file)
    except BaseException as exc:  # an exec'd script can raise anything; report, never hang
        return "error", f"{type(exc).__name__}: {exc}"[:500]


class Dispatcher:
    """What both ways (`forks.Forks`, `servers.Servers`) share: jobs read from stdin into a queue,
    results written to the parent."""

    def __init__(self, jobs: int, out_fd: int) -> None:
        self.jobs = jobs
        self.out_fd = out_fd
        self.pending: deque[RunJob] = deque()
        self.selector = selectors.DefaultSelector()
        self.reader = MessageReader()

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
            if isinstance(message, Cancel):
                unwanted = set(message.jobs)
                self.pending = deque(job for job in self.pending if job.job not in unwanted)
                self.cancel(unwanted)
            elif isinstance(message, RunJob):
                self.pending.append(message)
            else:  # Quit
                return False
        return True

    def answer(self, answer: Answer) -> None:
        send(self.out_fd, answer)

    def cancel(self, jobs: set[int]) -> None:
        """Running `jobs` are no longer wanted: ended where that costs nothing else (`Forks`), else left to answer."""

    # How candidates run, defined by `Forks` and `Servers`: start queued jobs; read what a
    # selector key's `data` (a child, a server) wrote; when the next deadline is; kill the overdue.
    def dispatch(self) -> None: ...
    def readable(self, data: object) -> None: ...
    def wait_s(self) -> float | None: ...
    def expire(self) -> None: ...
    def shutdown(self) -> None: ...

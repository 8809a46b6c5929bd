"""The CPU way to run candidates: one child forked from the warm zygote per candidate.

Contract (`processes.dispatch`'s, and): each candidate runs in a child forked from the warm
zygote, in its own process group (`processes.group`), so a crash, abort, hang (killed at its
timeout, with any gcc it started) or OOM kills only that candidate. The zygote stays
single-threaded (torch.set_num_threads(1), Inductor compile_threads=1) because forking a process
with live OpenMP or compile-pool threads can deadlock the child. A process that touched the CUDA
driver cannot fork children that use it: `forks_poisoned()` tells, after warming.
"""

from __future__ import annotations

import os
import selectors
import time
from dataclasses import dataclass, field

from pt2doctor.model.settings import settings
from pt2doctor.processes import group as process_group
from pt2doctor.processes.dispatch import Dispatcher, run_guarded
from pt2doctor.processes.protocol import Answer, MessageReader, RunJob, encode, ended


@dataclass
class _Child:
    job_id: int
    fd: int
    deadline: float
    chunks: list[bytes] = field(default_factory=list)


def _fork(job: RunJob) -> tuple[int, _Child]:
    read_fd, write_fd = os.pipe()

    def body() -> int:
        os.close(read_fd)
        if not settings().minify_debug:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
        os.write(write_fd, encode(Answer(job.job, *run_guarded(job.script, job.repro_file))))
        return 0

    pid = process_group.fork_in_group(body, error_code=0)
    os.close(write_fd)
    return pid, _Child(job.job, read_fd, time.monotonic() + job.timeout_s)


def forks_poisoned() -> bool:
    """Whether children forked from this process could not use CUDA (see the module docstring)."""
    from pt2doctor.capture.torch_compat import cuda_fork_poisoned

    pid = process_group.fork_in_group(lambda: 1 if cuda_fork_poisoned() else 0, error_code=1)
    return process_group.wait(pid) != 0


class Forks(Dispatcher):
    """One child forked from this warm process per candidate."""

    def __init__(self, jobs: int, out_fd: int) -> None:
        super().__init__(jobs, out_fd)
        self.children: dict[int, _Child] = {}

    def dispatch(self) -> None:
        while self.pending and len(self.children) < self.jobs:
            pid, child = _fork(self.pending.popleft())
            self.children[pid] = child
            self.selector.register(child.fd, selectors.EVENT_READ, pid)

    def wait_s(self) -> float | None:
        if not self.children:
            return None
        return max(0.0, min(c.deadline for c in self.children.values()) - time.monotonic())

    def readable(self, pid: object) -> None:
        child = self.children.get(pid)  # type: ignore[call-overload]
        if child is None:  # reaped by a `Cancel` read earlier in the same round of the selector's events
            return
        data = os.read(child.fd, 1 << 16)
        if data:
            child.chunks.append(data)
            return
        code = self._reap(pid)  # type: ignore[arg-type]
        answers = MessageReader().feed(b"".join(child.chunks))
        self.answer(answers[0] if answers and isinstance(answers[0], Answer) else ended(child.job_id, code))

    def expire(self) -> None:
        for pid in process_group.overdue((pid, c.deadline) for pid, c in self.children.items()):
            child = self.children[pid]
            self._reap(pid)
            self.answer(Answer(child.job_id, "timeout"))

    def cancel(self, jobs: set[int]) -> None:
        for pid in [pid for pid, child in self.children.items() if child.job_id in jobs]:
            self._reap(pid)  # unanswered: the pool has dropped it

    def _reap(self, pid: int) -> int:
        child = self.children.pop(pid)
        self.selector.unregister(child.fd)
        os.close(child.fd)
        return process_group.reap(pid)  # with gcc or other grandchildren the candidate left behind

    def shutdown(self) -> None:
        for pid in list(self.children):
            self._reap(pid)

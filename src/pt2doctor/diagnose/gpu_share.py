"""How many of diagnose's runs of the program may share the GPU at once: as many as its memory holds.

Contract: `GpuShare(gpu_visible, jobs)`; a run is started inside `with share.slot():` and told back what it
used with `share.learn(session)`; work that starts processes of the program its own way holds
`share.whole()`. On a machine without a GPU nothing waits. With one, the first
run goes alone: until a run has said how much GPU memory the program held at its peak (the child measures it
at exit, `capture.child.torch_env.gpu_memory`), two copies could together need more than the device has, and
an OutOfMemoryError that only sharing caused would be diagnosed as the program's. Once measured, as many
runs share the GPU as fit in 90% of its memory (at least one, at most `jobs`); a program that used no GPU
lifts the limit. A run that died before saying (a signal), or that used the GPU without the caching allocator
(whose own peak is not known), teaches nothing: the limit stays where it was.
`said()` is the decision in words, for the diagnosis's notes (None while nothing limits the runs).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from pt2doctor.model.session import Session

_USABLE = 0.9  # of the device's memory: the rest is the allocator's fragmentation and the driver's


class GpuShare:
    def __init__(self, gpu_visible: bool, jobs: int) -> None:
        self.jobs = max(1, jobs)
        self.visible = gpu_visible
        self.limit: int | None = 1 if gpu_visible else None  # None: no limit
        self.peak: int | None = None
        self.total: int | None = None
        self._running = 0
        self._whole = False  # work outside the runs holds the GPU's share (`whole`)
        self._changed = threading.Condition()

    @contextmanager
    def slot(self) -> Iterator[None]:
        with self._changed:
            while self._whole or (self.limit is not None and self._running >= self.limit):
                self._changed.wait()
            self._running += 1
        try:
            yield
        finally:
            with self._changed:
                self._running -= 1
                self._changed.notify_all()

    @contextmanager
    def whole(self) -> Iterator[None]:
        """The whole share, for work that runs the program in processes of its own (the program reducer's
        workers and verification runs, `at_once` of them as `limit` says): while the share is limited, it waits
        until no run holds a slot (a run queued earlier may still be running), and no run starts until it ends."""
        with self._changed:
            while self.limit is not None and (self._whole or self._running):
                self._changed.wait()
            self._whole = self.limit is not None
        try:
            yield
        finally:
            with self._changed:
                self._whole = False
                self._changed.notify_all()

    def learn(self, session: Session) -> None:
        """What one run used: its peak (a GPU used) or nothing (it ended by itself, torch imported, no GPU used)."""
        env = session.environment
        reported = session.exit.signal is None and not session.exit.timed_out  # the child wrote its facts at exit
        with self._changed:
            if env.gpu_peak_bytes and env.gpu_total_bytes:
                self.peak = max(self.peak or 0, env.gpu_peak_bytes)
                self.total = env.gpu_total_bytes
                self.limit = max(1, min(self.jobs, int(_USABLE * self.total // self.peak)))
            elif reported and session.extras.torch_imported and not env.gpu_total_bytes and self.peak is None:
                self.limit = None  # the program ran without touching a GPU
            self._changed.notify_all()

    def said(self) -> str | None:
        if self.limit is None or self.limit >= self.jobs or self.peak is None or self.total is None:
            return None
        return (f"the program held {_gib(self.peak)} of the GPU's {_gib(self.total)} at its peak: its runs shared "
                f"the GPU {self.limit} at a time, so that no run ran out of memory because another held it")


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"

"""How a diagnosis is stopped from outside, and by its own budget, without losing what it found.

Contract: inside `stoppable(budget_s, on_stop)` (on the main thread; elsewhere it does nothing), SIGTERM and SIGHUP (a
`timeout`, a CI job's limit, a scheduler's preemption, a closed terminal) raise `Stopped` as Ctrl-C raises
`KeyboardInterrupt`, and so does the budget running out (SIGALRM at `budget_s`): `Stopped` is a
`KeyboardInterrupt`, so every step that keeps its best so far on Ctrl-C (the minifier, the program reducer) keeps it
here too, and `diagnose` writes what was found. The first signal stops; the ones after it are ignored while the
bundle is written (a scheduler that means it follows with SIGKILL, and the diagnosis.json written as the verdict
became known is already on disk). The handlers in place before are put back on leaving.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
BUDGET = "budget"


class Stopped(KeyboardInterrupt):
    """The diagnosis was stopped: `why` is the signal's name (`SIGTERM`) or `budget`."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def why_stopped(exc: KeyboardInterrupt) -> str:
    """`SIGINT` for a plain Ctrl-C, else what `Stopped` says."""
    return exc.why if isinstance(exc, Stopped) else signal.SIGINT.name


class Stop:
    """Why the diagnosis inside `stoppable` was stopped ("" while it was not): the first stop's reason, whatever
    exception reaches the caller (a reducer that kept its best re-raises a plain `KeyboardInterrupt`)."""

    def __init__(self) -> None:
        self.why = ""

    def reason(self, exc: KeyboardInterrupt) -> str:
        return self.why or why_stopped(exc)


@contextmanager
def stoppable(budget_s: float | None = None, on_stop: Callable[[], None] | None = None) -> Iterator[Stop]:
    """`on_stop` is called first, in the handler: what runs is ended at once, so that no wait on it (a thread pool
    closing, a verification) holds the stop up."""
    stop = Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        if stop.why:
            return
        stop.why = BUDGET if signum == signal.SIGALRM else signal.Signals(signum).name
        if on_stop is not None:
            on_stop()
        raise Stopped(stop.why)

    watched = (*STOP_SIGNALS, *((signal.SIGALRM,) if budget_s else ()))
    before = {s: signal.signal(s, handle) for s in watched}
    if budget_s:
        signal.setitimer(signal.ITIMER_REAL, budget_s)
    try:
        yield stop
    finally:
        if budget_s:
            signal.setitimer(signal.ITIMER_REAL, 0)
        for s, handler in before.items():
            signal.signal(s, handler)


@contextmanager
def shielded() -> Iterator[None]:
    """Inside, a stop signal (SIGINT included) is ignored: what was found is being written."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    watched = (signal.SIGINT, *STOP_SIGNALS)
    before = {s: signal.signal(s, signal.SIG_IGN) for s in watched}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)

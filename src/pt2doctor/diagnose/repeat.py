"""The first run's plain repeat, which checks that a failure repeats (`diagnose.reproduce`): `SecondRun`.

Contract: at low priority until it is awaited; forked as the control once the fork server is ready, while the first
run still goes (`start_early`), else started after the verdict (`start`); `first_ended` says whether the early one
stands (see `diagnose.reproduce`'s contract).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, wait
from contextlib import suppress

from pt2doctor.diagnose.runs import VariantRunner
from pt2doctor.diagnose.variants import Variant
from pt2doctor.model.diagnosis import Attempt
from pt2doctor.processes import launch
from pt2doctor.processes.fresh_forks import FreshForks

_EARLY_READY_S = 600.0  # the fork server's imports, at low priority beside the first run
_ENDED_S = 10.0  # a stopped run's process reaped, its attempt made


class SecondRun:
    """The plain run that checks a failure repeats, at low priority until it is awaited: `start()` (by
    `diagnose.narrowing.stage_evidence`, once the stage's evidence is in hand or queued; or sooner, `start_early`) and
    `result()` (by `repeated`, which starts it if nothing did)."""

    def __init__(self, runner: VariantRunner) -> None:
        self._runner = runner
        self._future: Future[Attempt] | None = None
        self._priority: launch.Priority | None = None
        self._lock = threading.Lock()
        self._first_ended = False  # `first_ended`: no start before it from here on
        self.checked = False  # `repeated` has compared it with the first

    def start(self) -> None:
        """At low priority until `result()` awaits it: beside the minifier and the workaround's run ahead it takes the
        cores they leave idle (ResNet: the diagnosis 17.5-17.6 s against 18.1-18.3 at normal priority, alternating)."""
        with self._lock:
            self._start()

    def _start(self) -> None:
        with self._runner.step("reproduce"):  # counted as the reproduction it is, whoever starts it
            if self._future is None:
                forking = self._runner.forking
                self._future, self._priority = self._runner.in_background(Variant.repeat())
                if forking.server is not None:  # the control: the runs after it fork once it ended as the first
                    forking.control, forking.hurry = self._future, self._priority.urgent

    def start_early(self, forks: FreshForks, first: Future[Attempt]) -> None:
        """Forked as the control while the first run still goes, once the fork server is ready (a thread of its own
        waits for it): at low priority it takes the core the first run leaves idle as it compiles and runs, one thread
        at a time (GPT-2: one of the two cores idle for 4.5 s of its 11 s first run). Not once the first run ended:
        then `start()`'s caller starts it, after the verdict."""
        def when_ready() -> None:
            if forks.wait_ready(_EARLY_READY_S):
                with self._lock:
                    if not self._first_ended and not first.done() and not self._runner.closed:
                        self._runner.forking.server = forks
                        with suppress(RuntimeError):  # the runner closed meanwhile (a stop): its pool takes no run
                            self._start()

        threading.Thread(target=when_ready, daemon=True, name="pt2doctor-repeat-early").start()

    def first_ended(self, first: Attempt, forks: FreshForks | None) -> None:
        """The first run ended (`first`: its failure is what the control must end with), and the later runs fork on
        `forks` (None: they start anew: the first passed, or imported no torch). A repeat started early, forked, then
        does not stand: it is stopped, and ended before its folder is written again (by the plain run of a program
        that passed, or the repeat started as usual)."""
        with self._lock:
            self._first_ended = True
            forking = self._runner.forking
            forking.first, forking.server = first.signature, forks
            if self._future is not None and forks is None:
                self._runner.stop(self._future)
                wait([self._future], timeout=launch.GRACE_S + _ENDED_S)
                self._future = self._priority = forking.control = forking.hurry = None

    def running(self) -> bool:
        return self._future is None or not self._future.done()

    def result(self) -> Attempt:
        self.start()
        assert self._future is not None and self._priority is not None
        self._priority.urgent()
        return self._future.result()

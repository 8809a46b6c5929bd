"""The program reducer's checker: what `pysource_minimize` calls for each candidate (`reduce.program`).

Contract: `ProgramReduction(oracle, source, budget_s, reporter, keep, patience, patience_s)(candidate) -> bool`
answers whether a candidate fails as the script did (the oracle's `FAILS_SAME`), each source asked once (a cache), a
candidate `keep` refuses answered False without a run; it owns the best program so far (fewest code lines, then
characters), the counts, and the stop: `StopReduction` is raised (and `stopped` says why) past the budget
(`"budget"`), after `patience` new candidates or `patience_s` seconds that kept nothing (`"no_progress"`), on Ctrl-C
(`"interrupted"`) or when the workers end (`"workers_ended"`). After the first check the pool's per-check timeout is
a few times that check's time (`_TIMEOUT_FACTOR`, at least `_MIN_TIMEOUT_S`). Progress goes to the reporter.
"""

from __future__ import annotations

import time
from typing import Protocol

from pt2doctor.capture.runner import Reporter
from pt2doctor.processes.pool import WorkerPool, WorkerPoolError
from pt2doctor.reduce.core import Outcome
from pt2doctor.reduce.program_keep import Keep


class CandidateOracle(Protocol):
    """What judges one candidate (`reduce.program.ProgramOracle`), in the pool whose timeout the first check sets."""

    pool: WorkerPool

    def __call__(self, source: str) -> Outcome: ...


_MIN_TIMEOUT_S = 10.0
_TIMEOUT_FACTOR = 4.0  # a candidate may take this many times the original program's check


def code_lines(source: str) -> int:
    return sum(1 for line in source.splitlines() if line.strip() and not line.lstrip().startswith("#"))


def _size(source: str) -> tuple[int, int]:
    return code_lines(source), len(source)


class StopReduction(Exception):
    """Raised inside the library's checker to end the reduction (budget or Ctrl-C)."""


class ProgramReduction:
    """The library's checker: owns the best program so far, the cache, the counts and the deadline."""

    def __init__(self, oracle: CandidateOracle, source: str, budget_s: float, reporter: Reporter,
                 keep: Keep | None = None, patience: int | None = None,
                 patience_s: float | None = None) -> None:
        self.oracle = oracle
        self.patience, self.patience_s = patience, patience_s
        self.improved_s = time.monotonic()  # when the best last got smaller (the start, before any)
        self.improved_at: list[int] = []  # the checks that found a smaller program
        self.keep = keep or Keep.of(source)
        self.candidates = 0  # new candidates: those checked and those `keep` refused unchecked
        self.improved_candidate = 0  # the candidate that last found a smaller program
        self.best = source
        self.lines_before = code_lines(source)
        self.reporter = reporter
        self.deadline = time.monotonic() + budget_s
        self.cache: dict[str, bool] = {}
        self.checks = 0
        self.check_s = 0.0
        self.stopped: str | None = None

    def __call__(self, source: str) -> bool:
        if time.monotonic() > self.deadline:
            self.stopped = "budget"
            raise StopReduction
        if ((self.patience is not None and self.candidates - self.improved_candidate >= self.patience)
                or (self.patience_s is not None and time.monotonic() - self.improved_s >= self.patience_s)):
            self.stopped = "no_progress"
            raise StopReduction
        if source not in self.cache:
            self.candidates += 1
        if source not in self.cache and not self.keep.allows(source):
            self.cache[source] = False  # it changed the check or a seed, compiles nothing or breaks a name
        if source not in self.cache:
            started = time.monotonic()
            try:
                outcome = self.oracle(source)
            except KeyboardInterrupt:
                self.stopped = "interrupted"
                raise StopReduction from None
            except WorkerPoolError:  # the zygote ended (a Ctrl-C reaches it too): keep the best so far
                self.stopped = "workers_ended"
                raise StopReduction from None
            self.check_s += time.monotonic() - started
            self.checks += 1
            self.cache[source] = outcome is Outcome.FAILS_SAME
            if self.cache[source] and _size(source) < _size(self.best):
                self.best = source
                self.improved_at.append(self.checks)
                self.improved_candidate, self.improved_s = self.candidates, time.monotonic()
            if self.checks == 1:
                self.oracle.pool.timeout_s = min(self.oracle.pool.timeout_s,
                                                 max(_MIN_TIMEOUT_S, _TIMEOUT_FACTOR * self.check_s))
            if self.checks % 25 == 0 or (self.cache[source] and self.best is source):
                self.report()
        return self.cache[source]

    def report(self) -> None:
        self.reporter.status(f"program reduction: {self.checks} checks, {self.lines_before} lines -> "
                             f"{code_lines(self.best)} lines")

"""The generic reducer: a `ReductionProblem[T]` that owns the best case so far, and its gate.

Contract (after Hypothesis' shrinker, shrinkray's `problem.py` and picire's `dd.py`):
- The problem knows nothing about what `T` is. It is given an `oracle` that answers a batch of
  candidates with one `Outcome` each, a `key` that canonicalises a candidate for the cache, and a
  `sort_key` that orders candidates (smaller is better).
- `consider(c)` / `consider_first(cs)` are the only ways `current` changes. A candidate is accepted
  only when the oracle says `FAILS_SAME` *and* its sort key is strictly smaller than the current
  one. Every other outcome (`PASSES`, `FAILS_OTHER`, `TIMEOUT`, `CRASHED` with another signal) is
  rejected, so the reduction never drifts to a different failure (pytorch#93521).

Invariants:
- `current` always fails the same way as the initial case, and its sort key never increases, so
  any loop of passes terminates (the sort key is well-founded) and `reduce()` stops at a fixed point.
- Progress is deterministic for a deterministic oracle: batches are judged in candidate order and
  the first accepted candidate in order wins, whatever order the workers finish in.
- Passes re-read `problem.current` after every accepted step, so their loops stay valid while
  the target shrinks under them.
- Each canonical key is sent to the oracle at most once (the cache); `Stats.queries` counts real
  oracle calls, `Stats.cache_hits` the answers the cache gave.
- Given `first_failing` (the oracle's answers in candidate order up to the first `FAILS_SAME`, None for the
  candidates after it that it no longer waited for), `consider_first` asks it instead: the same candidate wins,
  sooner; an unanswered candidate is counted a query (it ran until it was no longer wanted), `cancelled` in
  `Stats.cancelled` and `Stats.outcomes`, is not cached, and is asked again if it comes up.
- Stopping early (Ctrl-C, deadline) raises `ReductionStopped`, which carries the best so far.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Generic, Protocol, TypeVar

T = TypeVar("T")


class Outcome(str, Enum):
    """What the oracle says about one candidate."""

    FAILS_SAME = "fails_same"
    PASSES = "passes"
    FAILS_OTHER = "fails_other"
    TIMEOUT = "timeout"
    CRASHED = "crashed"


Oracle = Callable[[Sequence[T]], Sequence[Outcome]]
FirstFailing = Callable[[Sequence[T]], Sequence[Outcome | None]]
Pass = Callable[["ReductionProblem[T]"], None]


class ProgressReporter(Protocol):
    """Progress sink; the CLI hands in a rich one, tests and the API a silent one."""

    def progress(self, pass_name: str, size: int, queries: int, cache_hits: int) -> None: ...


class SilentProgress:
    def progress(self, pass_name: str, size: int, queries: int, cache_hits: int) -> None:
        return None


class ReductionStopped(Exception):
    """Raised when a reduction stops before its fixed point; `best` still fails the same way."""

    def __init__(self, best: object, reason: str) -> None:
        super().__init__(reason)
        self.best = best
        self.reason = reason


@dataclass(slots=True)
class Stats:
    """Mutable counters owned by one problem; frozen into the model's result at the end."""

    queries: int = 0
    cache_hits: int = 0
    cancelled: int = 0
    accepted: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started


class ReductionProblem(Generic[T]):
    """The best case so far, the cache of tried candidates, the stats and the `consider` gate."""

    def __init__(
        self,
        initial: T,
        oracle: Oracle[T],
        *,
        key: Callable[[T], Hashable],
        sort_key: Callable[[T], tuple[int, ...]],
        size: Callable[[T], int] | None = None,
        jobs: int = 1,
        reporter: ProgressReporter | None = None,
        deadline_s: float | None = None,
        first_failing: FirstFailing[T] | None = None,
    ) -> None:
        self.initial = initial
        self.current = initial
        self.oracle = oracle
        self.first_failing = first_failing
        self.key = key
        self.sort_key = sort_key
        self.size = size or (lambda c: sort_key(c)[0])
        self.jobs = max(1, jobs)
        self.reporter = reporter or SilentProgress()
        self.stats = Stats()
        self.pass_name = "initial"
        self._cache: dict[Hashable, Outcome] = {key(initial): Outcome.FAILS_SAME}
        self._deadline = None if deadline_s is None else time.monotonic() + deadline_s

    def test(self, candidates: Sequence[T]) -> list[Outcome]:
        """Judge candidates, asking the oracle (one batch) only for keys not seen before."""
        return self._test(candidates, self.oracle)  # type: ignore[return-value]  # the oracle answers every one

    def _test(self, candidates: Sequence[T], oracle: FirstFailing[T]) -> list[Outcome | None]:
        self._check_deadline()
        keys = [self.key(c) for c in candidates]
        missing: dict[Hashable, T] = {}
        for k, c in zip(keys, candidates):
            if k in self._cache or k in missing:
                self.stats.cache_hits += 1
            else:
                missing.setdefault(k, c)
        if missing:
            answers = oracle(list(missing.values()))
            for k, outcome in zip(missing, answers):
                self.stats.queries += 1  # asked: a cancelled one ran until it was no longer wanted
                said = "cancelled" if outcome is None else outcome.value
                self.stats.outcomes[said] = self.stats.outcomes.get(said, 0) + 1
                if outcome is None:
                    self.stats.cancelled += 1
                else:
                    self._cache[k] = outcome
            self._report()
        return [self._cache.get(k) for k in keys]

    def is_better(self, candidate: T) -> bool:
        return self.sort_key(candidate) < self.sort_key(self.current)

    def consider(self, candidate: T) -> bool:
        """Accept `candidate` if it is smaller and fails the same way."""
        return self.consider_first([candidate])

    def consider_first(self, candidates: Sequence[T]) -> bool:
        """Judge candidates `jobs` at a time, in order; accept the first smaller FAILS_SAME."""
        useful = [c for c in candidates if self.is_better(c)]
        for start in range(0, len(useful), self.jobs):
            batch = useful[start:start + self.jobs]
            for candidate, outcome in zip(batch, self._test(batch, self.first_failing or self.oracle)):
                if outcome is Outcome.FAILS_SAME and self.is_better(candidate):
                    self._accept(candidate)
                    return True
        return False

    def _accept(self, candidate: T) -> None:
        self.current = candidate
        self.stats.accepted[self.pass_name] = self.stats.accepted.get(self.pass_name, 0) + 1
        self._report()

    def _report(self) -> None:
        self.reporter.progress(
            self.pass_name, self.size(self.current), self.stats.queries, self.stats.cache_hits
        )

    def _check_deadline(self) -> None:
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise ReductionStopped(self.current, "deadline")


def reduce(problem: ReductionProblem[T], passes: Sequence[Pass[T]], *, max_rounds: int = 50) -> T:
    """Run the passes in order until none makes progress; Ctrl-C raises `ReductionStopped`."""
    try:
        for _ in range(max_rounds):
            before = problem.sort_key(problem.current)
            for reduction_pass in passes:
                problem.pass_name = reduction_pass.__name__
                reduction_pass(problem)
            if problem.sort_key(problem.current) >= before:
                break
    except KeyboardInterrupt:
        raise ReductionStopped(problem.current, "interrupted") from None
    return problem.current

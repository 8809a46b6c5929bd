"""Generic reduction passes: bisection on a cut point and delta debugging over item sets.

Contract: a pass takes a `ReductionProblem` and changes it only through `consider*`, so every
invariant of `reduce.core` holds. The two search helpers (`bisect_cut`, `ddmin`) are told how to
build a candidate from a cut point or from a kept subset; format adapters (the FX passes, the toy
tuple passes below) name the pass and supply the builder. Both search helpers ask the oracle up
to `problem.jobs` questions at once, so a pool of workers is kept busy.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TypeVar

from pt2doctor.reduce.core import Outcome, ReductionProblem

T = TypeVar("T")
I = TypeVar("I")  # noqa: E741 - the reducer's index type, as in shrinkray


def bisect_cut(problem: ReductionProblem[T], lo: int, hi: int, build: Callable[[int], T]) -> bool:
    """Find the smallest cut `k` in [lo, hi) whose candidate still fails; accept it.

    `build(hi)` is taken to be the current case. Assumes failures are monotone in `k` (a longer
    prefix keeps the failing part), as torch's own minifier does; a wrong guess only costs
    queries, since nothing is accepted that the oracle did not confirm.
    """
    accepted = False
    while lo < hi:
        probes = _spread(lo, hi, problem.jobs)
        outcomes = problem.test([build(k) for k in probes])
        failing = [k for k, o in zip(probes, outcomes) if o is Outcome.FAILS_SAME]
        if failing:
            hi = failing[0]
            # Accept at once (the answer is cached) so an interrupt keeps this progress.
            accepted = problem.consider(build(hi)) or accepted
            passing_below = [k for k in probes if k < hi]
            lo = passing_below[-1] + 1 if passing_below else lo
        else:
            lo = probes[-1] + 1
    return accepted


def _spread(lo: int, hi: int, jobs: int) -> list[int]:
    """`jobs` distinct probe points in [lo, hi), splitting it into jobs+1 near-equal parts."""
    span = hi - lo
    if span <= jobs:
        return list(range(lo, hi))
    return sorted({lo + (span * (i + 1)) // (jobs + 1) for i in range(jobs)})


def ddmin(problem: ReductionProblem[T], items: Sequence[I], build: Callable[[Sequence[I]], T]) -> bool:
    """Zeller's ddmin over `items` (complements first, then subsets); `build(kept)` -> candidate.

    Returns whether anything was accepted. `items` are those of the current case; after an
    accepted step the search continues on the kept items only.
    """
    kept = list(items)
    granularity = 2
    progressed = False
    while len(kept) >= 2:
        chunks = _split(kept, granularity)
        complements = [[x for c in chunks if c is not chunk for x in c] for chunk in chunks]
        tries = complements + (chunks if granularity > 2 else [])
        index = _first_accepted(problem, [build(t) for t in tries])
        if index is not None:
            kept = tries[index]
            granularity = max(granularity - 1, 2) if index < len(complements) else 2
            progressed = True
        elif granularity < len(kept):
            granularity = min(len(kept), granularity * 2)
        else:
            break
    if len(kept) == 1 and problem.consider(build([])):
        progressed = True
    return progressed


def _first_accepted(problem: ReductionProblem[T], candidates: list[T]) -> int | None:
    if not problem.consider_first(candidates):
        return None
    return next(i for i, c in enumerate(candidates) if c is problem.current)


def _split(items: list[I], n: int) -> list[list[I]]:
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        if end > start:
            out.append(items[start:end])
        start = end
    return out


# --- the same searches on plain tuples, for toy problems and tests -----------------------------

def _keep(items: Sequence[I]) -> tuple[I, ...]:
    return tuple(items)


def _prefix(items: tuple, k: int) -> tuple:
    return items[:k]


def _suffix(items: tuple, k: int) -> tuple:
    return items[len(items) - k:]


def ddmin_elements(problem: ReductionProblem[tuple]) -> None:
    """Delete elements of a tuple by ddmin."""
    ddmin(problem, problem.current, _keep)


def truncate_tail(problem: ReductionProblem[tuple]) -> None:
    """Keep the shortest failing prefix."""
    bisect_cut(problem, 0, len(problem.current), functools.partial(_prefix, problem.current))


def truncate_head(problem: ReductionProblem[tuple]) -> None:
    """Keep the shortest failing suffix."""
    bisect_cut(problem, 0, len(problem.current), functools.partial(_suffix, problem.current))

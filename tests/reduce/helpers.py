"""`reduce_with(passes, initial, is_interesting)`: run the generic reducer on a toy problem."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pt2doctor.reduce.core import Outcome, ReductionProblem, reduce


def toy_problem(initial: tuple, is_interesting: Callable[[tuple], bool], jobs: int = 1) -> ReductionProblem[tuple]:
    def oracle(cands: Sequence[tuple]) -> list[Outcome]:
        return [Outcome.FAILS_SAME if is_interesting(c) else Outcome.PASSES for c in cands]

    return ReductionProblem(initial, oracle, key=tuple, sort_key=lambda c: (len(c), c), jobs=jobs)


def reduce_with(passes: Sequence, initial: tuple, is_interesting: Callable[[tuple], bool], jobs: int = 1) -> tuple:
    return reduce(toy_problem(initial, is_interesting, jobs), passes)

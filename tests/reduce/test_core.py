"""The generic reducer on toy tuples: exact minimal results, the gate, the cache, early stops."""

from __future__ import annotations

import pytest
from helpers import reduce_with, toy_problem
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2doctor.reduce.core import Outcome, ReductionProblem, ReductionStopped, reduce
from pt2doctor.reduce.passes import ddmin_elements, truncate_head, truncate_tail

ALL = (truncate_tail, truncate_head, ddmin_elements)


def test_single_culprit_is_found_exactly():
    assert reduce_with(ALL, tuple(range(100)), lambda c: 37 in c) == (37,)


def test_pair_of_culprits_is_found_exactly():
    assert reduce_with(ALL, tuple(range(64)), lambda c: 3 in c and 60 in c) == (3, 60)


@pytest.mark.parametrize("jobs", [1, 2, 4])
def test_parallel_batches_give_the_same_result(jobs):
    assert reduce_with(ALL, tuple(range(200)), lambda c: 150 in c and 7 in c, jobs=jobs) == (7, 150)


def test_truncate_tail_keeps_shortest_failing_prefix():
    assert reduce_with((truncate_tail,), tuple(range(50)), lambda c: 20 in c) == tuple(range(21))


def test_other_failures_are_never_accepted():
    def oracle(cands):
        return [Outcome.FAILS_OTHER if len(c) < 5 else Outcome.FAILS_SAME for c in cands]

    problem = ReductionProblem(tuple(range(10)), oracle, key=tuple, sort_key=lambda c: (len(c), c))
    assert len(reduce(problem, ALL)) == 5


def test_cache_answers_repeated_candidates():
    calls = []

    def oracle(cands):
        calls.extend(cands)
        return [Outcome.PASSES for _ in cands]

    problem = ReductionProblem((1, 2), oracle, key=tuple, sort_key=lambda c: (len(c), c))
    problem.test([(1,), (1,), (2,)])
    problem.test([(1,)])
    assert calls == [(1,), (2,)]
    assert problem.stats.queries == 2 and problem.stats.cache_hits == 2


def test_interrupt_keeps_best_so_far():
    def oracle(cands):
        if any(len(c) < 8 for c in cands):
            raise KeyboardInterrupt
        return [Outcome.FAILS_SAME for _ in cands]

    problem = ReductionProblem(tuple(range(16)), oracle, key=tuple, sort_key=lambda c: (len(c), c))
    with pytest.raises(ReductionStopped) as stop:
        reduce(problem, ALL)
    assert len(stop.value.best) == 8


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 30), min_size=1, max_size=40), st.sets(st.integers(0, 30), min_size=1, max_size=3))
def test_result_still_fails_and_second_reduction_is_a_no_op(items, needles):
    needles = {n for n in needles if n in items} or {items[0]}

    def interesting(c):
        return needles <= set(c)

    first = reduce_with(ALL, tuple(items), interesting)
    assert interesting(first)
    assert len(first) <= len(items)
    assert len(first) == len(needles)
    problem = toy_problem(first, interesting)
    assert reduce(problem, ALL) == first
    assert problem.stats.accepted == {}


def test_first_failing_picks_the_same_candidate_and_caches_only_what_it_answered():
    """The oracle's answers up to the first FAILS_SAME (None after it): that candidate wins, as with every answer;
    a candidate left unanswered is asked again when it comes up."""
    asked: list[tuple[int, ...]] = []

    def first_failing(cands):
        asked.extend(cands)
        answers, found = [], False
        for c in cands:
            answers.append(None if found else Outcome.FAILS_SAME if 3 in c else Outcome.PASSES)
            found = found or 3 in c
        return answers

    problem = ReductionProblem((1, 2, 3), lambda cs: [], key=tuple, sort_key=lambda c: (len(c), c), jobs=3,
                               first_failing=first_failing)
    assert problem.consider_first([(1,), (3,), (2,)])
    assert problem.current == (3,) and problem.stats.cancelled == 1 and problem.stats.queries == 3
    problem.current = (1, 2, 3)
    assert not problem.consider_first([(2,)])
    assert asked == [(1,), (3,), (2,), (2,)]  # (2,) unanswered the first time: asked again

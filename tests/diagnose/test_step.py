"""diagnose's step loop (`diagnose.step`): results passed by name, steps skipped or stopped, progress and
timings, and what runs in the background closed however the procedure ends."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.procedure import STEPS
from pt2doctor.diagnose.step import STOP, Context, Step, run_steps


class _Said:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def status(self, text: str) -> None:
        self.lines.append(text)


@dataclass
class _Running:
    closed: list[bool] = field(default_factory=list)

    def close(self) -> None:
        self.closed.append(True)


def _context() -> Context:
    return Context(options=None, runner=None, reporter=_Said())  # type: ignore[arg-type]


def _found() -> Found:
    return Found(command=("x.py",))


def test_each_step_gets_the_earlier_results_it_names_and_its_time_and_progress_are_kept():
    def first(ctx, found):
        return 2

    def second(ctx, found, first):
        return first * 10

    ctx, found = _context(), _found()
    results = run_steps((Step("first", first), Step("second", second, "multiplying")), ctx, found)
    assert results == {"first": 2, "second": 20}
    assert set(found.timings) == {"first", "second"} and ctx.reporter.lines == ["multiplying"]


def test_a_step_whose_input_was_not_established_or_that_does_not_apply_is_skipped_untimed():
    def nothing(ctx, found):
        return None

    def needs_it(ctx, found, nothing):
        raise AssertionError("ran without its input")

    def never(ctx, found):
        return False

    def runs(ctx, found):
        return "ran"

    found = _found()
    results = run_steps((Step("nothing", nothing), Step("needs_it", needs_it), Step("later", runs, when=never),
                         Step("last", runs)), _context(), found)
    assert (results == {"nothing": None, "last": "ran"} and "needs_it" not in found.timings
            and "later" not in found.timings)


def test_stop_ends_the_procedure_and_what_runs_in_the_background_is_closed():
    running = _Running()

    def start(ctx, found):
        return running

    def conclude(ctx, found):
        found.headline = "concluded"
        return STOP

    def after(ctx, found):
        raise AssertionError("ran after the conclusion")

    found = _found()
    run_steps((Step("start", start), Step("conclude", conclude), Step("after", after)), _context(), found)
    assert found.headline == "concluded" and running.closed == [True]


def test_an_interrupt_propagates_after_closing_what_runs():
    running = _Running()

    def start(ctx, found):
        return running

    def interrupted(ctx, found):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_steps((Step("start", start), Step("interrupted", interrupted)), _context(), _found())
    assert running.closed == [True]


def test_a_step_taking_what_no_earlier_step_returns_is_refused():
    def later(ctx, found, missing):
        return 1

    with pytest.raises(AssertionError, match="missing"):
        run_steps((Step("later", later),), _context(), _found())


def test_diagnoses_steps_are_read_off_one_tuple_each_taking_only_earlier_results():
    names = [s.name for s in STEPS]
    assert names[:3] == ["reproduce", "classify", "export"] and names[-1] == "conclude"
    for i, step in enumerate(STEPS):
        assert set(step.wants()) <= set(names[:i]), step.name

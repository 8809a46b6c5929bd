"""Which torch releases a search runs, in what order, and what it concludes (issue 29): the pure logic of
`analysis.versions`, on the release list pip gave on this project's machine (2026-11-26)."""

from __future__ import annotations

import math

import pytest

from pt2doctor.analysis.versions import (
    UnknownRelease,
    build_note,
    conclude,
    next_release,
    outcome_of,
    requirement,
    search_list,
)
from pt2doctor.model.versions import Boundary, ReleaseOutcome, ReleaseRun

# `pip index versions torch` here (PyPI, the local index and /opt/wheels; torch<=2.14.1 is a pip constraint)
PIP_TEXT = ("2.15.0, 2.14.1, 2.14.0, 2.13.0+cpu, 2.13.0, 2.12.1, 2.12.0, 2.11.0, 2.10.0, 2.9.1, 2.9.0, 2.8.0, "
            "2.7.1, 2.7.0, 2.6.0, 2.5.1, 2.5.0, 2.4.1, 2.4.0, 2.3.1, 2.3.0, 2.2.2, 2.2.1, 2.2.0, 2.1.2, 2.1.1, "
            "2.1.0, 2.0.1, 2.0.0, 1.13.1, 1.13.0")
PIP_LISTED = tuple(PIP_TEXT.split(", "))
FAILS, PASSES, OTHER, CANNOT = (ReleaseOutcome.FAILS_SAME, ReleaseOutcome.PASSES, ReleaseOutcome.FAILS_OTHER,
                                ReleaseOutcome.CANNOT_RUN)


def _search(releases: tuple[str, ...], user: str, truth: dict[str, ReleaseOutcome], default: ReleaseOutcome
            ) -> tuple[list[str], tuple[Boundary | None, Boundary | None]]:
    """Run the search against known outcomes: the releases in the order run (the user's first), the conclusions."""
    tried = {user: FAILS}
    while (release := next_release(releases, tried)) is not None:
        assert release not in tried, "a release is never run twice"
        tried[release] = truth.get(release, default)
    runs = [ReleaseRun(r, o) for r, o in tried.items()]
    return list(tried), conclude(releases, runs, user)


def test_the_default_list_is_yours_up_to_the_newest_listed_one_entry_per_release():
    assert search_list(PIP_LISTED, "2.13.0+cpu") == ("2.13.0", "2.14.0", "2.14.1", "2.15.0")


def test_ranges_and_releases_asked_for_are_resolved_against_the_listing_with_yours_added():
    assert search_list(PIP_LISTED, "2.13.0+cpu", ("2.11.0..2.12.1", "2.14.1")) == (
        "2.11.0", "2.12.0", "2.12.1", "2.13.0", "2.14.1")
    assert search_list(PIP_LISTED, "2.13.0+cpu", ("..2.0.1",))[:2] == ("1.13.0", "1.13.1")
    with pytest.raises(UnknownRelease):
        search_list(PIP_LISTED, "2.13.0", ("3.0.0..3.1.0",))


def test_this_machine_an_uninstallable_newest_is_passed_over_and_the_fix_is_bisected_to_one_release():
    releases = search_list(PIP_LISTED, "2.13.0+cpu")
    order, (fixed, regressed) = _search(releases, "2.13.0", {"2.15.0": CANNOT, "2.14.1": PASSES}, FAILS)
    assert order == ["2.13.0", "2.15.0", "2.14.1", "2.14.0"]
    assert fixed == Boundary("2.14.0", "2.14.1", exact=True) and regressed is None


def test_a_bug_the_newest_release_still_has_costs_one_run():
    order, (fixed, regressed) = _search(search_list(PIP_LISTED, "2.13.0"), "2.13.0", {"2.15.0": CANNOT}, FAILS)
    assert order == ["2.13.0", "2.15.0", "2.14.1"] and fixed is None and regressed is None


def test_a_fix_among_many_releases_costs_about_log2_of_them():
    releases = search_list(PIP_LISTED, "2.0.0", ("2.0.0..2.14.1",))
    fixed_from = "2.6.0"
    truth = {r: PASSES for r in releases if releases.index(r) >= releases.index(fixed_from)}
    order, (fixed, _) = _search(releases, "2.0.0", truth, FAILS)
    assert fixed == Boundary("2.5.1", "2.6.0", exact=True)
    assert len(order) - 1 <= 1 + math.ceil(math.log2(len(releases))), order  # the newest, then bisection


def test_a_regression_is_the_first_release_failing_the_same_way_after_one_that_passed():
    releases = search_list(PIP_LISTED, "2.13.0", ("2.11.0..2.14.1",))
    order, (fixed, regressed) = _search(releases, "2.13.0", {"2.11.0": PASSES}, FAILS)
    assert regressed == Boundary("2.11.0", "2.12.0", exact=True) and fixed is None
    assert order[:3] == ["2.13.0", "2.14.1", "2.11.0"]  # the ends first, the newest before the oldest


def test_a_release_that_cannot_run_is_replaced_by_a_neighbour_and_the_boundary_says_it_is_not_exact():
    releases = search_list(PIP_LISTED, "2.4.0", ("2.4.0..2.6.0",))  # 2.4.0 2.4.1 2.5.0 2.5.1 2.6.0
    order, (fixed, _) = _search(releases, "2.4.0", {"2.5.0": CANNOT, "2.5.1": PASSES, "2.6.0": PASSES}, FAILS)
    assert "2.5.0" in order and fixed == Boundary("2.4.1", "2.5.1", exact=False)


def test_a_release_that_fails_otherwise_is_no_fix_and_its_boundary_is_searched_too():
    releases = search_list(PIP_LISTED, "2.12.0", ("2.12.0..2.14.1",))  # 2.12.0 2.12.1 2.13.0 2.14.0 2.14.1
    order, (fixed, regressed) = _search(releases, "2.12.0", {"2.14.0": OTHER, "2.14.1": OTHER}, FAILS)
    assert fixed is None and regressed is None
    assert "2.13.0" in order  # bisected down to where the outcome changes: 2.13.0 fails the same way, 2.14.0 not


def test_an_outcome_is_judged_by_the_whole_signature():
    target = "BackendCompilerFailed: LoweringException: AssertionError: (target: aten.bartlett_window.default)"
    assert outcome_of(target, target) is FAILS and outcome_of(None, target) is PASSES
    assert outcome_of("AssertionError: Tensor-likes are not close!", target) is OTHER


def test_pip_is_asked_for_your_build_where_the_index_lists_it():
    assert requirement("2.13.0", "2.13.0+cpu", PIP_LISTED) == "torch==2.13.0+cpu"
    assert requirement("2.14.1", "2.13.0+cpu", PIP_LISTED) == "torch==2.14.1"  # no CPU build of it here
    assert requirement("2.14.1", "2.13.0", PIP_LISTED) == "torch==2.14.1"


def test_a_release_run_as_another_build_than_yours_is_said():
    run = ReleaseRun("2.14.1", PASSES, torch="2.14.1+cu130", build="cuda 13.0")
    note = build_note("cpu", run)
    assert note == ("torch 2.14.1 ran as its cuda 13.0 build (2.14.1+cu130), yours is a cpu build (pip installs the "
                    "build your index lists); it runs on the CPU too")
    assert build_note("cuda 13.0", run) is None

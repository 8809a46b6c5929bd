"""What a search over torch releases hands over (issue 29): the upgrade first among the workarounds, verified
on the repro and said so; the releases' table in issue.md, the HTML section and diagnosis.json; a
regression named with the release that still passed."""

from __future__ import annotations

from pt2doctor.analysis.versions import conclude
from pt2doctor.diagnose.conclusions import conclude as conclude_diagnosis
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.frozen import freeze
from pt2doctor.diagnose.reported import HandOver, Reported, Upgrade
from pt2doctor.diagnose.upgrade import upgrade_workaround
from pt2doctor.model import Category
from pt2doctor.model.diagnosis import Diagnosis, FailingStage, Workaround
from pt2doctor.model.minify import BackendKind, BackendSpec
from pt2doctor.model.serialize import dumps, loads
from pt2doctor.model.versions import Boundary, ReleaseOutcome, ReleaseRun, VersionsResult
from pt2doctor.report.html_diagnosis import diagnosis_section
from pt2doctor.report.issue import render_issue
from pt2doctor.report.versions import conclusions, versions_markdown

TARGET = "BackendCompilerFailed: LoweringException: AssertionError: (target: aten.bartlett_window.default)"
RELEASES = ("2.13.0", "2.14.0", "2.14.1", "2.15.0")
RUNS = (
    ReleaseRun("2.13.0", ReleaseOutcome.FAILS_SAME, "2.13.0+cpu", "cpu", TARGET, run_s=6.2),
    ReleaseRun("2.14.0", ReleaseOutcome.FAILS_SAME, "2.14.0+cu130", "cuda 13.0", TARGET, install_s=161.0, run_s=7.9),
    ReleaseRun("2.14.1", ReleaseOutcome.PASSES, "2.14.1+cu130", "cuda 13.0", install_s=158.0, run_s=7.1),
    ReleaseRun("2.15.0", ReleaseOutcome.CANNOT_RUN, why="pip could not install torch==2.15.0: Cannot install"),
)


def _result() -> VersionsResult:
    fixed, regressed = conclude(RELEASES, RUNS, "2.13.0")
    return VersionsResult("/tmp/bundle/repro.py", TARGET, "2.13.0", RELEASES, RUNS, fixed, regressed)


def _found() -> Found:
    return Found(command=("bug.py",), category=Category.BACKEND_FAILURE, stage=FailingStage.INDUCTOR,
                 error="BackendCompilerFailed: LoweringException", backend=BackendSpec(BackendKind.NAMED, "inductor"),
                 stages={"eager": "pass", "aot_eager": "pass", "inductor": "fail"})


def _reported(result: VersionsResult | None = None) -> Reported:
    """The script's workaround the hand-over verified; with `result`, what the `versions` step returns beside it."""
    tried = HandOver((Workaround("`@torch.compiler.disable` on `f`", "--- a\n+++ b\n", True, "ran to the end"),))
    return Reported(hand_over=tried, upgrade=Upgrade(result, upgrade_workaround(result)) if result else None)


def test_the_fixing_release_is_offered_first_verified_on_the_repro_and_said_so():
    found = _found()
    result = _result()
    assert result.fixed == Boundary("2.14.0", "2.14.1", exact=True)
    conclude_diagnosis(found)
    first, second = freeze(found, reported=_reported(result)).next_steps[:2]
    assert first.startswith("Workaround, verified on the repro (not on your whole program): upgrade torch to 2.14.1")
    assert "2.14.1+cu130" in first and second.startswith("Workaround, verified on a copy of your script")


def test_the_upgrade_says_how_to_run_the_whole_program_under_that_release():
    upgrade = upgrade_workaround(_result(), ("train.py", "--lr", "1e-3"))
    assert upgrade is not None and upgrade.verified_on == "repro" and "was not run under it" in upgrade.outcome
    assert "`pt2doctor versions --releases 2.14.1 train.py --lr 1e-3`" in upgrade.outcome


def test_no_upgrade_is_offered_when_no_newer_release_passes():
    runs = (RUNS[0], ReleaseRun("2.14.1", ReleaseOutcome.FAILS_SAME, signature=TARGET))
    result = VersionsResult("repro.py", TARGET, "2.13.0", RELEASES, runs, *conclude(RELEASES, runs, "2.13.0"))
    assert upgrade_workaround(result) is None
    assert "not fixed in torch 2.14.1, the newest release run: it fails the same way" in conclusions(result)


def test_issue_md_has_the_releases_table_and_the_upgrade_apart_from_the_script_workaround():
    text = render_issue(freeze(_found(), reported=_reported(_result())), None)
    assert "**Upgrade** (verified on the repro, not on the whole program" in text
    assert "upgrade torch to 2.14.1." in text
    assert "**Workaround** (verified: a copy of the program" in text and "`@torch.compiler.disable` on `f`" in text
    assert "| 2.13.0 (yours) | cpu | fails the same way |" in text
    assert "| 2.14.1 | cuda 13.0 | passes |  | 158 | 7.1 |" in text
    assert "- fixed in torch 2.14.1: repro.py passes there and fails under 2.14.0" in text


def test_a_regression_names_the_last_release_that_passed():
    runs = (ReleaseRun("2.11.0", ReleaseOutcome.PASSES), ReleaseRun("2.12.0", ReleaseOutcome.FAILS_SAME),
            ReleaseRun("2.13.0", ReleaseOutcome.FAILS_SAME))
    releases = ("2.11.0", "2.12.0", "2.12.1", "2.13.0")
    result = VersionsResult("repro.py", TARGET, "2.13.0", releases, runs, *conclude(releases, runs, "2.13.0"))
    assert "regressed in torch 2.12.0: passes under 2.11.0, fails the same way from 2.12.0" in versions_markdown(result)


def test_diagnosis_json_and_the_html_section_carry_the_search():
    diagnosis = freeze(_found(), reported=_reported(_result()))
    again = loads(dumps(diagnosis), Diagnosis)
    assert again.versions == _result() and again.versions.fixed.after == "2.14.1"
    section = diagnosis_section(diagnosis)
    rows = section["torch releases (repro.py under each)"]
    assert [r["outcome"] for r in rows] == ["fails the same way", "fails the same way", "passes", "cannot run"]
    assert any("fixed in torch 2.14.1" in f["finding"] for f in section["what the torch releases say"])

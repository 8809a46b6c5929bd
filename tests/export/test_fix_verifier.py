"""The one fix verifier's parts that decide (`export.diagnose.verify`, `export.analysis.fixes`,
`capture.script_copy`): which changes a failure gets, the order they are tried in and when trying stops,
and each rule's verdict. Hand-built values, no runs; the runs are in test_export_diagnose.py (diagnose) and
test_export_draft.py (`explain --try-fixes`)."""

from __future__ import annotations

from pathlib import Path

from pt2doctor.capture.script_copy import ChangeVerdict, copy_env, try_in_turn, write_copy
from pt2doctor.export.analysis.fixes import data_dependent_candidates, failure_candidates
from pt2doctor.export.analysis.issues import ExportIssue, issue_key
from pt2doctor.export.diagnose.verify import draft_no_longer_reports, failing_call_passes
from pt2doctor.model import SourceLoc
from pt2doctor.model.diagnosis import Attempt
from pt2doctor.model.export import ExportEvent, ExportFailureKind, ExportStep, Phase
from pt2doctor.model.export_draft import DraftIssueKind

BRANCH = "def f(x, n):\n    if n > 0:\n        return x + 1\n    return x - 1\n"
CHECK, NEGATED, COND = ("torch._check(n > 0)", "torch._check(not (n > 0))",
                        "return torch.cond(n > 0, lambda: x + 1, lambda: x - 1)")


def _texts(candidates: list[tuple[str, object]]) -> list[str]:
    return [text for text, _ in candidates]


def test_one_rule_picks_the_data_dependent_candidates_for_diagnose_and_explain() -> None:
    guard = "Could not guard on data-dependent expression u0 > 0"
    assert _texts(data_dependent_candidates(BRANCH, 2, guard)) == [CHECK, NEGATED, COND]  # diagnose: both
    assert _texts(data_dependent_candidates(BRANCH, 2, "u0 > 0", took=True)) == [CHECK, COND]  # explain
    assert _texts(data_dependent_candidates(BRANCH, 2, "u0 > 0", took=False)) == [NEGATED, COND]
    assert _texts(data_dependent_candidates(BRANCH, 2, "Eq(u0, 1)", took=True)) == [COND]  # a tensor's truth


def test_failure_candidates_by_kind() -> None:
    kind = ExportFailureKind
    assert _texts(failure_candidates(kind.DATA_DEPENDENT, BRANCH, 2, "guard")) == [CHECK, NEGATED, COND]
    assert failure_candidates(kind.DATA_DEPENDENT, BRANCH, None, "guard") == []  # no line in the script
    assert failure_candidates(kind.UNSUPPORTED, BRANCH, 2, "graph_break()") == []
    suggested = "Suggested fixes:\n  b = Dim('b', min=5, max=64)\n"
    dims = failure_candidates(kind.CONSTRAINT_VIOLATION, "from torch.export import Dim\nb = Dim('b')\n", None,
                              suggested)
    assert _texts(dims) == ["b = Dim('b', min=5, max=64)"]


def test_changes_are_tried_in_turn_until_one_settles_it() -> None:
    ran: list[int] = []
    tried = try_in_turn([1, 2, 3, 4], lambda c: ran.append(c) or c * 10,
                        lambda c, r: ChangeVerdict(r >= 20, f"ran {r}", settles=c == 2))
    assert ran == [1, 2]  # 3 and 4 are never run
    assert [(t.candidate, t.run, t.verdict.verified) for t in tried] == [(1, 10, False), (2, 20, True)]


def test_a_copy_is_written_beside_nothing_of_the_users_and_imports_from_the_scripts_folder(tmp_path: Path) -> None:
    script = tmp_path / "user" / "train.py"
    script.parent.mkdir()
    script.write_text("original")
    copy = write_copy(script, tmp_path / "export-fix" / "1", "changed")
    assert (copy, copy.read_text(), script.read_text()) == (tmp_path / "export-fix" / "1" / "train.py", "changed",
                                                           "original")
    env = copy_env(script, {"A": "1"})
    assert env["A"] == "1" and env["PYTHONPATH"].split(":")[0] == str(script.parent.resolve())


def _attempt(outcome: str, error: str = "") -> Attempt:
    return Attempt("fix-1", None, outcome, None, None, 0, 1.0, "", error)  # type: ignore[arg-type]


def test_the_failing_call_rule() -> None:
    failed = ExportEvent(2, ExportStep.NON_STRICT_TRACE, Phase.FAILED, "GuardOnDataDependentSymNode")
    passed = [ExportEvent(2, ExportStep.NON_STRICT_TRACE, Phase.PASSED)]
    assert failing_call_passes(failed, _attempt("pass"), passed) == ChangeVerdict(
        True, "the export passes and the script then passed", settles=True)
    assert failing_call_passes(failed, _attempt("fail", "AssertionError"), passed) == ChangeVerdict(
        True, "the export passes; the script then fails: AssertionError")
    other_call = [ExportEvent(1, ExportStep.NON_STRICT_TRACE, Phase.PASSED)]
    assert failing_call_passes(failed, _attempt("fail", "E"), other_call) == ChangeVerdict(False, "still fails: E")


def test_the_draft_export_rule() -> None:
    issue = ExportIssue(DraftIssueKind.DATA_DEPENDENT, SourceLoc("s.py", 10, "f", "if n > 0:"), "", (1,), 1)
    moved = ExportIssue(DraftIssueKind.DATA_DEPENDENT, SourceLoc("s.py", 11, "f", "if n > 0:"), "", (1,), 1)
    comparable = ChangeVerdict(True, "")
    assert draft_no_longer_reports(issue, set(), comparable).verified
    assert not draft_no_longer_reports(issue, {issue_key(moved)}, comparable).verified  # the line moved: same issue
    cut_short = ChangeVerdict(False, "the copy made 0 export call(s), the script 1: it ended before")
    assert draft_no_longer_reports(issue, set(), cut_short) == cut_short

"""`explain` on exporting scripts: draft_export run beside each real export call (on copies), its report
recorded as `DraftReport`s, and the issues with their fixes (`export.analysis.issues`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pt2doctor.capture.runner import RunOptions, run_script
from pt2doctor.export.analysis.issues import find_export_issues
from pt2doctor.export.report.advice import render_export_issues
from pt2doctor.model import ExitInfo, Session, SourceLoc
from pt2doctor.model.child import Hooks
from pt2doctor.model.export import ExportEvent, ExportStep, Phase
from pt2doctor.model.export_draft import DraftIssue, DraftIssueKind, DraftReport

SCRIPTS = Path(__file__).parent / "scripts"
Kind = DraftIssueKind


def _session(tmp_path: Path, script: str) -> Session:
    options = RunOptions(SCRIPTS / script, (), tmp_path / script, timeout_s=300, hooks=Hooks(draft_export=True),
                         echo=False)
    return run_script(options)


def test_every_issue_of_two_export_calls_in_one_pass_with_the_users_lines_and_fixes(tmp_path: Path) -> None:
    session = _session(tmp_path, "draft_many.py")
    # the script's own exports ran as written and failed as they do without pt2doctor
    stdout = (tmp_path / "draft_many.py" / "stdout.txt").read_text()
    assert stdout.count("export failed: GuardOnDataDependentSymNode") == 2
    assert [d.index for d in session.export_drafts] == [0, 1] and not any(d.error for d in session.export_drafts)
    found = find_export_issues(session)
    by_kind = {(i.kind, i.where.line if i.where else None): i for i in found.issues}
    assert set(by_kind) == {(Kind.DATA_DEPENDENT, 17), (Kind.DATA_DEPENDENT, 21), (Kind.MISSING_FAKE_KERNEL, None)}
    assert all(i.exports == (1, 2) for i in found.issues)  # one issue per line, from both calls
    item = by_kind[(Kind.DATA_DEPENDENT, 17)]
    assert item.where is not None and item.where.file == str(SCRIPTS / "draft_many.py")
    assert item.fixes[0].text == "torch._check(total > 2)" and item.fixes[0].at is not None
    assert (item.fixes[0].at.line, item.fixes[0].replaces) == (17, 0)
    assert by_kind[(Kind.DATA_DEPENDENT, 21)].fixes[0].text == "torch._check(n > 1)"  # the unbacked size
    assert 'register_fake("pt2doctor_test::scale")' in by_kind[(Kind.MISSING_FAKE_KERNEL, None)].fixes[0].text
    text = render_export_issues(found)
    assert "3 issue(s)" in text and "`torch._check(n > 1)` before line 21 (`if n > 1:`)" in text


def test_a_bad_dim_is_a_guard_with_torchs_suggested_dim_in_place_of_the_scripts(tmp_path: Path) -> None:
    session = _session(tmp_path, "bad_dim.py")
    failed = [e for e in session.export_steps if e.phase is Phase.FAILED]
    assert failed and "Constraints violated" in failed[0].message  # the script's own export still failed
    (issue,) = find_export_issues(session).issues
    assert issue.kind is Kind.GUARD_ADDED and issue.where is not None and issue.where.line == 8
    assert issue.fixes[0].text == "b = Dim('b', min=5, max=64)" and issue.fixes[0].at is not None
    assert (issue.fixes[0].at.line, issue.fixes[0].replaces) == (13, 1)
    assert "Dim.AUTO(min=2, max=64)" in issue.fixes[1].text


def test_a_tensor_truth_value_gets_torch_cond_and_a_branch_the_example_did_not_take_gets_the_negation() -> None:
    source = ("class M:\n    def forward(self, x):\n        if x.sum() > 0:\n            return x + 1\n"
              "        return x - 1\n\n    def other(self, n):\n        if n > 0:\n            return 1\n"
              "        return 2\n")
    tensor_at, item_at = SourceLoc("model.py", 3, "forward", "if x.sum() > 0:"), SourceLoc("model.py", 8, "other")
    issues = (DraftIssue(Kind.DATA_DEPENDENT, expr="Eq(u0, 1)", result="True", user_stack=(tensor_at,)),
              DraftIssue(Kind.DATA_DEPENDENT, expr="u1 > 0", result="False", user_stack=(item_at,)))
    session = Session(schema="s", torch_version=None, command=("model.py",), exit=ExitInfo(code=0),
                      export_steps=(ExportEvent(0, ExportStep.NON_STRICT_TRACE, Phase.PASSED),),
                      export_drafts=(DraftReport(0, issues=issues[:1]), DraftReport(1, issues=issues[1:])))
    found = find_export_issues(session, read=lambda _path: source)
    tensor, negated = found.issues
    assert tensor.fixes[0].text == "return torch.cond(x.sum() > 0, lambda: x + 1, lambda: x - 1)"
    assert [f.text for f in negated.fixes] == ["torch._check(not (n > 0))",
                                               "return torch.cond(n > 0, lambda: 1, lambda: 2)"]


@pytest.mark.slow
def test_explain_json_lists_the_export_issues(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"),
                                                        os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "pt2doctor", "explain", "--json", "--out", str(tmp_path / "run"),
                           str(SCRIPTS / "item_branch.py")], capture_output=True, text=True, env=env, timeout=600)
    doc = json.loads(done.stdout)
    (issue,) = doc["export"]["issues"]
    assert issue["kind"] == "data_dependent_error" and issue["where"]["line"] == 10
    assert issue["fixes"][0]["text"] == "torch._check(total > 2)"
    assert doc["explain"] == []  # no graph breaks: the torch.compile part is still there


@pytest.mark.slow
def test_try_fixes_verifies_the_fixes_together_in_one_copy_and_leaves_the_script_alone(tmp_path: Path) -> None:
    from pt2doctor.export.diagnose.verify import verify_issue_fixes

    before = (SCRIPTS / "bad_dim.py").read_text()
    session = _session(tmp_path, "bad_dim.py")
    (issue,) = verify_issue_fixes(find_export_issues(session), session, 300).issues
    fix = issue.fixes[0]
    assert (fix.text, fix.verified) == ("b = Dim('b', min=5, max=64)", True), fix.outcome
    assert issue.fixes[1].verified is None  # only the first fix of an issue is tried
    copy = tmp_path / "bad_dim.py" / "export-fix" / "bad_dim.py"
    assert "b = Dim('b', min=5, max=64)" in copy.read_text()
    assert (SCRIPTS / "bad_dim.py").read_text() == before


def test_explain_and_report_headlines_say_what_the_run_judged_wrong(tmp_path: Path) -> None:
    # the script's own assert fails after run_decompositions declared a mutation the program did not: the
    # headline is the decomposition's accuracy failure, as diagnose says, not the script's user_error
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"),
                                                        os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "pt2doctor", "explain", "--out", str(tmp_path / "run"),
                           str(SCRIPTS / "decomp_mutation.py"), "check"], capture_output=True, text=True, env=env,
                          timeout=600)
    report = subprocess.run([sys.executable, "-m", "pt2doctor", "report", str(tmp_path / "run")], capture_output=True,
                            text=True, env=env, timeout=300)
    for out in (done.stdout, report.stdout):
        assert "FAILED (accuracy): ExportedProgram.run_decompositions does not match" in " ".join(out.split()), out
        assert "mutated user inputs none -> ['noise']" in " ".join(out.split())

"""The one fix verifier for export failures: the source changes of `export.analysis.fixes`, tried on copies
of the script (never the user's file), in turn (`capture.script_copy.try_in_turn`), by one of two rules.

Contract:
- `verify_failure_fixes(runner, found, kind, failed, line)` (`diagnose`): the candidates for the failure
  (`fixes.failure_candidates`: a data-dependent guard gets `torch._check(COND)`, `torch._check(not (COND))`
  before the `if`/`while` at the user's line, then the branch as one `torch.cond`, only the `torch.cond`
  on a tensor's truth value; a constraint violation gets the `Dim`s torch suggests), each in a copy
  under `<out>/export-fix/<n>/`, run as every diagnose run (`diagnose.runs.run_a_copy`). Rule
  `failing_call_passes`: a fix is `verified` when the export call that failed passes in that run; it
  settles the question when the whole script then passes (a check that exports but then fails at run
  time asserts the branch the program does not take: the next one may fit). Only lines of the script
  file itself are changed: a failure inside an imported module gets no fix.
- `verify_issue_fixes(found, session, timeout_s, reporter)` (`explain --try-fixes`): the first fix of
  every issue that changes the script file itself, all together in one copy under `<run>/export-fix/`,
  run as `explain` runs a script (draft_export beside each export call). Rule `draft_no_longer_reports`:
  a fix is verified when the copy made as many export calls, draft_export reported on each, and it no
  longer reports the issue (matched by kind, function, code and op: the copy's line numbers shift).
Both give each tried fix its verdict in the values they return; the script's directory is first on the
copy's `PYTHONPATH` (`capture.script_copy.copy_env`), so its imports resolve as before.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pt2doctor.capture.process_meta import RunPaths, records
from pt2doctor.capture.runner import Reporter, RunOptions, run_script
from pt2doctor.capture.script_copy import ChangeVerdict, copy_env, try_in_turn, write_copy
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.runs import VariantRunner, run_a_copy
from pt2doctor.export.analysis.fixes import Edit, apply_edits, failure_candidates
from pt2doctor.export.analysis.issues import ExportIssue, ExportIssues, find_export_issues, issue_key
from pt2doctor.model import Session, SourceLoc
from pt2doctor.model.child import Hooks
from pt2doctor.model.diagnosis import Attempt
from pt2doctor.model.export import ExportEvent, ExportFailureKind, ExportFix, Phase

Candidate = tuple[int, str, tuple[Edit, ...]]  # (its number, the change in words, the edits)


def verify_failure_fixes(runner: VariantRunner, found: Found, kind: ExportFailureKind, failed: ExportEvent,
                         line: SourceLoc | None) -> tuple[ExportFix, ...]:
    script = runner.call.script.resolve()
    source = script.read_text()
    if kind is ExportFailureKind.DATA_DEPENDENT and (line is None or Path(line.file).resolve() != script):
        found.notes.append("no fix was tried: the failing line is not in the script itself")
        return ()
    candidates = [(n, text, edits) for n, (text, edits) in
                  enumerate(failure_candidates(kind, source, line.line if line else None, failed.message), 1)]

    def run(candidate: Candidate) -> tuple[Attempt, list[ExportEvent]]:
        number, _, edits = candidate
        attempt, fix_runner = run_a_copy(runner, runner.call.out_dir / "export-fix" / str(number), f"fix-{number}",
                                         apply_edits(source, edits))
        found.attempts.append(attempt)
        return attempt, records(RunPaths(fix_runner.run_dir(attempt.label)).export_log, ExportEvent)

    tried = try_in_turn(candidates, run, lambda _c, ran: failing_call_passes(failed, *ran),
                        lambda c: runner.reporter.status(f"trying a fix in a copy of the script: {c[1]}"))
    return tuple(_export_fix(runner.call.script, source, t.candidate, t.verdict) for t in tried)


def failing_call_passes(failed: ExportEvent, attempt: Attempt, events: list[ExportEvent]) -> ChangeVerdict:
    """The export call that failed passes in the copy's run; settled when the whole script then passed."""
    verified = any(e.index == failed.index and e.step is failed.step and e.phase is Phase.PASSED for e in events)
    passed = verified and attempt.outcome == "pass"
    outcome = ("the export passes and the script then passed" if passed else
               f"the export passes; the script then fails: {attempt.error}" if verified else
               f"still fails: {attempt.error or attempt.outcome}")
    return ChangeVerdict(verified, outcome, settles=passed)


def _export_fix(script: Path, source: str, candidate: Candidate, verdict: ChangeVerdict) -> ExportFix:
    _, text, edits = candidate
    first = edits[-1]  # the change at the line torch pointed at (an inserted definition comes before it)
    at = SourceLoc(str(script), first.line, "", source.splitlines()[first.line - 1].strip())
    return ExportFix(text, at, first.replaces, verdict.verified, verdict.outcome, script_passed=verdict.settles)


def verify_issue_fixes(found: ExportIssues, session: Session, timeout_s: float | None,
                       reporter: Reporter | None = None) -> ExportIssues:
    script = Path(session.command[0]).resolve()
    tried = [i for i, issue in enumerate(found.issues) if _fixes_script(issue, script)]
    if not tried or session.run_dir is None:
        return found
    edits = tuple(dict.fromkeys(e for i in tried for e in found.issues[i].fixes[0].edits))  # a Dim fix is shared
    out = Path(session.run_dir) / "export-fix"

    def run(text: str) -> tuple[Path, Session]:
        copy = write_copy(script, out, text)
        options = RunOptions(copy, tuple(session.command[1:]), out / "run", timeout_s=timeout_s,
                             hooks=Hooks(draft_export=True), env=copy_env(script, {}), echo=False, label="export-fix")
        return copy, run_script(options, reporter)

    def status(_text: str) -> None:
        if reporter is not None:
            reporter.status(f"trying {len(tried)} fix(es) together in a copy of the script: {out / script.name}")

    (together,) = try_in_turn([apply_edits(script.read_text(), edits)], run,
                              lambda _text, ran: _comparable(session, ran[1]), status)
    (copy, fixed), comparable = together.run, together.verdict
    remaining = {issue_key(i) for i in find_export_issues(fixed).issues}
    issues = list(found.issues)
    for i in tried:
        verdict = draft_no_longer_reports(issues[i], remaining, comparable)
        first = replace(issues[i].fixes[0], verified=verdict.verified, outcome=f"{verdict.outcome} ({copy})")
        issues[i] = replace(issues[i], fixes=(first, *issues[i].fixes[1:]))
    return replace(found, issues=tuple(issues))


def draft_no_longer_reports(issue: ExportIssue, remaining: set[tuple[object, ...]],
                            comparable: ChangeVerdict) -> ChangeVerdict:
    """draft_export of the copy no longer reports `issue` (`remaining`: the keys of those it does report),
    where the copy's run can be compared with the script's at all (`comparable`)."""
    if not comparable.verified:
        return comparable
    verified = issue_key(issue) not in remaining
    return ChangeVerdict(verified, "draft_export of the copy no longer reports it" if verified else
                   "draft_export of the copy still reports it")


def _fixes_script(issue: ExportIssue, script: Path) -> bool:
    fix = issue.fixes[0] if issue.fixes else None
    return fix is not None and bool(fix.edits) and fix.at is not None and Path(fix.at.file).resolve() == script


def _comparable(before: Session, after: Session) -> ChangeVerdict:
    """Whether the copy's run says anything about the fixes (it made every export call, draft_export reported)."""
    if len(after.export_drafts) < len(before.export_drafts):
        return ChangeVerdict(False, f"the copy made {len(after.export_drafts)} export call(s), the script "
                              f"{len(before.export_drafts)}: "
                       + (after.failures[0].message.splitlines()[0] if after.failures else "it ended before"))
    errors = [d.error for d in after.export_drafts if d.error]
    if errors:
        return ChangeVerdict(False, f"draft_export of the copy gave no report: {errors[0].splitlines()[0]}")
    return ChangeVerdict(True, "")

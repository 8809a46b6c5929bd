"""`explain --try-fixes` on a script that exports: the proposed fixes, tried together in one copy.

Contract: `verify_export_fixes(found, session, timeout_s, reporter)` takes the first fix of every issue
that changes the script file itself (`export.analysis.issues`: edits from `export.analysis.fixes`, the
ones `diagnose` verifies one at a time), writes them all into a copy under `<run>/export-fix/`
(never the user's file), runs the copy once as `explain` runs a script (draft_export beside each export
call; the script's directory first on `PYTHONPATH`, so its imports resolve as before) and returns
`found` with each tried fix's verdict: verified when the copy made as many export calls, draft_export
reported on each, and it no longer reports the issue (matched by kind, function, code and op, as the
copy's line numbers shift).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from pt2doctor.export.analysis.fixes import apply_edits
from pt2doctor.export.analysis.issues import ExportIssue, ExportIssues, find_export_issues, issue_key
from pt2doctor.capture.runner import Reporter, RunOptions, run_script
from pt2doctor.model import Session
from pt2doctor.model.child import Hooks


def verify_export_fixes(found: ExportIssues, session: Session, timeout_s: float | None,
                        reporter: Reporter | None = None) -> ExportIssues:
    script = Path(session.command[0]).resolve()
    tried = [i for i, issue in enumerate(found.issues) if _fixes_script(issue, script)]
    if not tried or session.run_dir is None:
        return found
    edits = tuple(dict.fromkeys(e for i in tried for e in found.issues[i].fixes[0].edits))  # a Dim fix is shared
    out = Path(session.run_dir) / "export-fix"
    out.mkdir(parents=True, exist_ok=True)
    copy = out / script.name
    copy.write_text(apply_edits(script.read_text(), edits))
    path = os.pathsep.join(p for p in (str(script.parent), os.environ.get("PYTHONPATH", "")) if p)
    if reporter is not None:
        reporter.status(f"trying {len(tried)} fix(es) together in a copy of the script: {copy}")
    options = RunOptions(copy, tuple(session.command[1:]), out / "run", timeout_s=timeout_s,
                         hooks=Hooks(draft_export=True), env={"PYTHONPATH": path}, echo=False, label="export-fix")
    fixed = run_script(options, reporter)
    why = _incomparable(session, fixed)
    remaining = {issue_key(i) for i in find_export_issues(fixed).issues}
    issues = list(found.issues)
    for i in tried:
        verified = not why and issue_key(issues[i]) not in remaining
        outcome = why or ("draft_export of the copy no longer reports it" if verified else
                          "draft_export of the copy still reports it")
        first = replace(issues[i].fixes[0], verified=verified, outcome=f"{outcome} ({copy})")
        issues[i] = replace(issues[i], fixes=(first, *issues[i].fixes[1:]))
    return replace(found, issues=tuple(issues))


def _fixes_script(issue: ExportIssue, script: Path) -> bool:
    fix = issue.fixes[0] if issue.fixes else None
    return fix is not None and bool(fix.edits) and fix.at is not None and Path(fix.at.file).resolve() == script


def _incomparable(before: Session, after: Session) -> str:
    """Why the copy's run says nothing about the fixes, or ""."""
    if len(after.export_drafts) < len(before.export_drafts):
        return (f"the copy made {len(after.export_drafts)} export call(s), the script {len(before.export_drafts)}: "
                + (after.failures[0].message.splitlines()[0] if after.failures else "it ended before"))
    errors = [d.error for d in after.export_drafts if d.error]
    return f"draft_export of the copy gave no report: {errors[0].splitlines()[0]}" if errors else ""

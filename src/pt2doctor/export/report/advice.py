"""Plain text of `explain`'s torch.export part: the issues draft_export reported and the exported programs
judged wrong in the run (`export.analysis.issues`).

Contract: `render_export_issues(found) -> str`, pure; empty when the script exported nothing.
"""

from __future__ import annotations

from pt2doctor.export.analysis.issues import ExportFixProposal, ExportIssue, ExportIssues
from pt2doctor.model.export import STEP_TITLES
from pt2doctor.model.export_draft import DraftIssueKind

_TITLES = {
    DraftIssueKind.DATA_DEPENDENT: "data-dependent condition",
    DraftIssueKind.GUARD_ADDED: "constraint violation: guard on an input size",
    DraftIssueKind.CONSTRAINT_VIOLATION: "constraint violation",
    DraftIssueKind.MISSING_FAKE_KERNEL: "missing fake kernel",
    DraftIssueKind.MISMATCHED_FAKE_KERNEL: "mismatched fake kernel",
}


def render_export_issues(found: ExportIssues) -> str:
    if not found.exports and not found.wrong_results:
        return ""
    out = [f"torch.export: {found.exports} export call(s), {len(found.issues)} issue(s) draft_export reports"
           + (", most frequent first" if len(found.issues) > 1 else ""), ""]
    for number, issue in enumerate(found.issues, 1):
        out += _issue_lines(number, issue)
    for check in found.wrong_results:
        out.append(f"!! wrong result: {STEP_TITLES[check.step]} differs from {check.against}"
                   + (f" on {check.inputs}" if check.inputs else ""))
        out.append(f"     {check.detail}")
    out += [f"note: {note}" for note in found.notes]
    return "\n".join(out) + "\n"


def _issue_lines(number: int, issue: ExportIssue) -> list[str]:
    what = f"`{issue.expr}`" if issue.expr else f"torch.ops.{issue.op}" if issue.op else ""
    where = f" at {issue.where} in {issue.where.function}" if issue.where else ""
    calls = ", ".join(map(str, issue.exports))
    times = f", {issue.occurrences}x" if issue.occurrences > 1 else ""
    out = [f"{number}. {_TITLES[issue.kind]} {what}{where}  (export call {calls}{times})".replace("  ", " ", 1)]
    if issue.where is not None and issue.where.code:
        out.append(f"     > {issue.where.code}")
    out.append(f"     cause: {issue.cause}")
    if issue.names:
        out.append(f"     values: {'; '.join(issue.names)}")
    for index, fix in enumerate(issue.fixes):
        out.append(f"     {'fix:' if index == 0 else 'or: '}  {_fix_text(fix)}")
        if fix.verified is not None:
            out.append(f"           {'verified' if fix.verified else 'not verified'}: {fix.outcome}")
    out.append("")
    return out


def _fix_text(fix: ExportFixProposal) -> str:
    text = fix.text.replace("\n", "\n            ")
    if fix.at is None:
        return text
    if not fix.replaces:
        return f"`{text}` before line {fix.at.line} (`{fix.at.code}`)"
    lines = f"line {fix.at.line}" if fix.replaces == 1 else f"lines {fix.at.line}-{fix.at.line + fix.replaces - 1}"
    return f"`{text}` in place of {lines}"

"""`explain` on a script that exports: every issue draft_export reported, once each, with the user's line
and the fix; and every exported program the run judged wrong.

Contract: `find_export_issues(session, read=...) -> ExportIssues` reads `session.export_drafts` (one
`DraftReport` per export call), `session.export_steps` (the script's own export calls: a constraint
violation's message carries torch's suggested `Dim`s) and `session.export_checks`. Issues are
deduplicated across export calls by kind, user line and op (the same line in a loop of exports is one
issue, with every call it came from), most occurrences first. The fix of each issue is the first
candidate of `export.analysis.fixes` that fits (`data_dependent_candidates`: the one rule `diagnose`
verifies), proposed, not run: a data-dependent `if`/`while` gets `torch._check` of the branch the example
inputs took (a tensor's truth value gets `torch.cond`); guards added for a constraint violation get
torch's suggested `Dim`s; a custom op gets a fake kernel. `read` reads a user file (the fixes are edits of its text).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from pt2doctor.export.analysis.fixes import Edit, data_dependent_candidates, dim_candidates, is_tensor_truth
from pt2doctor.model import Session, SourceLoc
from pt2doctor.model.export import TRACE_STEPS, ExportEvent, Phase
from pt2doctor.model.export_draft import DraftIssue, DraftIssueKind, ExportCheck, failed_checks

_Kind = DraftIssueKind
_DIM_HINT = re.compile(r"DimHint\(AUTO, ([^)]*)\)")  # how torch prints Dim.AUTO(min=.., max=..)


@dataclass(frozen=True, slots=True)
class ExportFixProposal:
    """`text` at `at` (replacing `replaces` lines from it; 0: inserted before it), or in words (`at` None).
    `edits`: the change to the file of `at`; `verified`: None when not tried (`explain --try-fixes` tries
    them, `export.diagnose.verify`), else whether draft_export of a copy with it no longer reports the issue."""

    text: str
    at: SourceLoc | None = None
    replaces: int = 0
    edits: tuple[Edit, ...] = ()
    verified: bool | None = None
    outcome: str = ""


@dataclass(frozen=True, slots=True)
class ExportIssue:
    kind: DraftIssueKind
    where: SourceLoc | None
    cause: str
    exports: tuple[int, ...]  # the export calls (1-based, in the script's order) that hit it
    occurrences: int
    expr: str = ""
    names: tuple[str, ...] = ()
    op: str = ""
    fixes: tuple[ExportFixProposal, ...] = ()


@dataclass(frozen=True, slots=True)
class ExportIssues:
    exports: int  # export calls draft_export looked at
    issues: tuple[ExportIssue, ...] = ()
    wrong_results: tuple[ExportCheck, ...] = ()
    notes: tuple[str, ...] = ()


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError):
        return None


def issue_key(issue: ExportIssue) -> tuple[object, ...]:
    """What stays the same of an issue when lines are inserted above it: its kind, code and op."""
    return issue.kind, issue.where.function if issue.where else "", issue.where.code if issue.where else "", issue.op


def find_export_issues(session: Session, read: Callable[[str], str | None] = _read) -> ExportIssues:
    merged: dict[tuple[object, ...], ExportIssue] = {}
    notes = []
    calls = {index: n for n, index in enumerate(sorted({e.index for e in session.export_steps
                                                            if e.step in TRACE_STEPS}), 1)}
    for draft in session.export_drafts:
        call = calls.get(draft.index, draft.index + 1)
        if draft.error:
            notes.append(f"export call {call}: draft_export gave no report: {draft.error.splitlines()[0]}")
        violation = _violation(session.export_steps, draft.index)
        issues = list(draft.issues)
        if violation is not None and not any(i.kind is _Kind.GUARD_ADDED for i in issues):
            issues.append(DraftIssue(_Kind.CONSTRAINT_VIOLATION))
        for issue in issues:
            found = _issue(issue, call, violation, read)
            key = (found.kind, found.where.file if found.where else "", found.where.line if found.where else 0,
                   found.op)
            old = merged.get(key)
            merged[key] = found if old is None else replace(
                old, exports=tuple(dict.fromkeys(old.exports + found.exports)),
                occurrences=old.occurrences + found.occurrences)
    ordered = sorted(merged.values(), key=lambda i: (-i.occurrences, min(i.exports),
                                                     i.where.line if i.where else 0))
    return ExportIssues(len(session.export_drafts), tuple(ordered), tuple(failed_checks(session.export_checks)),
                        tuple(notes))


def _violation(steps: tuple[ExportEvent, ...], index: int) -> str | None:
    """The message of the script's own export call `index` when it failed on its dynamic_shapes spec."""
    failed = next((e for e in steps if e.index == index and e.phase is Phase.FAILED), None)
    text = f"{failed.error_type}\n{failed.message}" if failed else ""
    return failed.message if failed and ("Constraints violated" in text or "ConstraintViolation" in text) else None


def _issue(issue: DraftIssue, call: int, violation: str | None, read: Callable[[str], str | None]) -> ExportIssue:
    where = issue.user_stack[-1] if issue.user_stack else None
    source = read(where.file) if where is not None else None
    fixes, cause = _FIXES[issue.kind](issue, where, source, violation)
    return ExportIssue(issue.kind, where, cause, (call,), issue.occurrences, issue.expr, issue.names, issue.op,
                       tuple(fixes))


Fixer = Callable[[DraftIssue, SourceLoc | None, str | None, str | None], tuple[list[ExportFixProposal], str]]


def _data_dependent(issue: DraftIssue, where: SourceLoc | None, source: str | None,
                    _violation: str | None) -> tuple[list[ExportFixProposal], str]:
    cause = (f"torch.export cannot decide `{issue.expr}` (a value known only when the program runs); "
             f"the example inputs made it {issue.result or 'one value'} and export specialized on that")
    if where is None or source is None:
        return [ExportFixProposal(f"torch._check({issue.expr}) on the user's values, "
                                  "before the line that needs it")], cause
    # assert the branch the example took
    fixes = _proposals(data_dependent_candidates(source, where.line, issue.expr, issue.result != "False"), where,
                       source)
    if is_tensor_truth(issue.expr):
        return fixes, cause + "; it is a tensor's truth value: only torch.cond keeps both outcomes"
    return fixes or [ExportFixProposal(f"torch._check(...) the fact this line relies on (`{issue.expr}`, "
                                       f"where {'; '.join(issue.names) or 'u* are values read from tensors'})")], cause


def _guard(issue: DraftIssue, where: SourceLoc | None, source: str | None,
           violation: str | None) -> tuple[list[ExportFixProposal], str]:
    cause = (f"the code needs `{issue.expr}`, which the dynamic_shapes spec does not guarantee: export fails "
             "with a constraint violation")
    # the Dims are changed where they are defined: in the file of the guard (a script with its model and spec)
    fixes = _proposals(dim_candidates(source, violation), where, source) if source and violation else []
    if issue.dynamic_shapes:
        spec = _DIM_HINT.sub(r"Dim.AUTO(\1)", issue.dynamic_shapes)
        fixes.append(ExportFixProposal(f"dynamic_shapes={spec} (Dim.AUTO: torch infers the range)"))
    return fixes, cause


def _violation_only(_issue: DraftIssue, _where: SourceLoc | None, _source: str | None,
                    violation: str | None) -> tuple[list[ExportFixProposal], str]:
    first = (violation or "").strip().splitlines()
    return [], "the dynamic_shapes spec does not hold for the program: " + (first[0] if first else "")


def _missing_fake(issue: DraftIssue, _where: SourceLoc | None, _source: str | None,
                  _violation: str | None) -> tuple[list[ExportFixProposal], str]:
    name = _op_name(issue.op)
    text = (f'@torch.library.register_fake("{name}")\ndef _(*args, **kwargs): return <empty tensors of the output '
            "shapes, computed from the inputs' shapes only>")
    return [ExportFixProposal(text)], (f"the custom op torch.ops.{issue.op} has no fake (meta) kernel: export "
                                       "cannot tell its output's shape without running it")


def _mismatched_fake(issue: DraftIssue, _where: SourceLoc | None, _source: str | None,
                     _violation: str | None) -> tuple[list[ExportFixProposal], str]:
    return ([ExportFixProposal("make the fake kernel registered with "
                               f'torch.library.register_fake("{_op_name(issue.op)}") agree with the real kernel')],
            f"the fake kernel of torch.ops.{issue.op} disagrees with the real one: {issue.reason}")


def _op_name(op: str) -> str:
    """`mylib.foo.default` -> `mylib::foo`, the name torch.library takes."""
    parts = op.split(".")
    return f"{parts[0]}::{parts[1]}" if len(parts) >= 2 else op


def _proposals(candidates: list[tuple[str, tuple[Edit, ...]]], where: SourceLoc | None,
               source: str) -> list[ExportFixProposal]:
    lines = source.splitlines()
    out = []
    for text, edits in candidates:
        main = edits[-1]  # the change at the line torch pointed at (an inserted definition comes before it)
        code = lines[main.line - 1].strip() if 0 < main.line <= len(lines) else ""
        file = where.file if where is not None else ""
        out.append(ExportFixProposal(text, SourceLoc(file, main.line, "", code) if file else None, main.replaces,
                                     edits if file else ()))
    return out


_FIXES: dict[DraftIssueKind, Fixer] = {
    _Kind.DATA_DEPENDENT: _data_dependent, _Kind.GUARD_ADDED: _guard, _Kind.CONSTRAINT_VIOLATION: _violation_only,
    _Kind.MISSING_FAKE_KERNEL: _missing_fake, _Kind.MISMATCHED_FAKE_KERNEL: _mismatched_fake,
}

"""Fixes for an export tracing failure, each verified by exporting a copy of the script with it.

Contract: `verified_fixes(runner, found, kind, failed, line)` proposes source changes for a
data-dependent guard (`torch._check(COND)` or `torch._check(not (COND))` before the `if`/`while` at
the user's line, then the branch rewritten as one `torch.cond`; a branch on a tensor's truth value gets
the `torch.cond` only, as `torch._check` takes no tensor) or a constraint violation (the `Dim` definitions torch suggests, in place of the
script's own), writes each into a copy of the script under `<out>/export-fix/<n>/` (never the user's
file), runs the copy (the script's directory first on `PYTHONPATH`, so its imports resolve as before)
and keeps the verdict: a fix is `verified` when the export call that failed passes in that run.
Only lines of the script file itself are changed: a failure inside an imported module gets no fix.
Candidates are tried one at a time, in order, until the whole script passes with one (a check that
exports but then fails at run time asserts the branch the program does not take: the next one may fit).
"""

from __future__ import annotations

import ast
import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.runs import ScriptCall, Variant, VariantRunner
from pt2doctor.model import SourceLoc
from pt2doctor.model.export import EVENTS_FILE, ExportEvent, ExportFailureKind, ExportFix, Phase
from pt2doctor.model.serialize import RecordError, read_lines


@dataclass(frozen=True, slots=True)
class Edit:
    """Replace `replaces` lines from `line` (1-based; 0 lines: insert before it) with `text`'s lines."""

    line: int
    replaces: int
    text: str

    def apply(self, source: str) -> str:
        lines = source.splitlines(keepends=True)
        new = [t + "\n" for t in self.text.splitlines()]
        return "".join(lines[: self.line - 1] + new + lines[self.line - 1 + self.replaces:])


def apply_edits(source: str, edits: tuple[Edit, ...]) -> str:
    """Every edit, from the last line up, so each edit's line numbers are those of `source`."""
    for edit in sorted(edits, key=lambda e: (e.line, e.replaces), reverse=True):
        source = edit.apply(source)
    return source


def guard_candidates(source: str, line: int) -> list[tuple[str, tuple[Edit, ...]]]:
    """`torch._check` of the condition of the `if`/`while` statement at `line`, then of its negation:
    the fact the branch relies on, asserted where torch.export can record it as a runtime check."""
    node = _statement_at(source, line)
    if not isinstance(node, (ast.If, ast.While)):
        return []
    cond = ast.get_source_segment(source, node.test)
    if cond is None:
        return []
    indent = " " * node.col_offset
    checks = [f"torch._check({cond})", f"torch._check(not ({cond}))"]
    return [(check, (Edit(node.lineno, 0, indent + check),)) for check in checks]


_SUGGESTION = re.compile(r"^\s+(\w+) = (.+)$")


def dim_candidates(source: str, message: str) -> list[tuple[str, tuple[Edit, ...]]]:
    """torch's "Suggested fixes" for a constraint violation, all together: each in place of the script's
    assignment to that name; a name the script lacks is defined before the first replaced one."""
    _, marker, block = message.partition("Suggested fixes:")
    suggestions = [m.groups() for m in map(_SUGGESTION.match, block.strip("\n").split("\n\n")[0].splitlines()) if m]
    if not marker or not suggestions:
        return []
    tree = ast.parse(source)
    assigned = {t.id: node for node in ast.walk(tree) if isinstance(node, ast.Assign)
                for t in node.targets if isinstance(t, ast.Name)}
    imported = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for a in node.names}
    texts = {name: f"{name} = {expr if 'Dim' in imported else _qualified(expr)}" for name, expr in suggestions}
    replaced = sorted((assigned[name] for name in texts if name in assigned), key=lambda n: n.lineno)
    if not replaced:
        return []
    edits = [Edit(n.lineno, (n.end_lineno or n.lineno) - n.lineno + 1, " " * n.col_offset + texts[_target(n)])
             for n in replaced]
    missing = "\n".join(" " * replaced[0].col_offset + t for name, t in texts.items() if name not in assigned)
    if missing:
        edits.insert(0, Edit(replaced[0].lineno, 0, missing))
    return [("; ".join(texts.values()), tuple(edits))]


def _qualified(expr: str) -> str:
    return re.sub(r"(?<![\w.])Dim\(", "torch.export.Dim(", expr)


def _target(node: ast.stmt) -> str:
    return next((t.id for t in getattr(node, "targets", ()) if isinstance(t, ast.Name)), "")


def cond_candidates(source: str, line: int) -> list[tuple[str, tuple[Edit, ...]]]:
    """The branch at `line` as one `torch.cond`: `if C: return A` followed by (`else:`) `return B`, or
    `if C: y = A else: y = B`, becomes `return torch.cond(C, lambda: A, lambda: B)` (or `y = ...`);
    both branches are traced and the choice is made when the program runs."""
    for parent in ast.walk(ast.parse(source)):
        for body in (getattr(parent, "body", None), getattr(parent, "orelse", None)):
            if not isinstance(body, list):
                continue
            for i, node in enumerate(body):
                if isinstance(node, ast.If) and node.lineno == line:
                    after = body[i + 1] if i + 1 < len(body) else None
                    return _as_cond(source, node, after)
    return []


def _as_cond(source: str, node: ast.If, after: ast.stmt | None) -> list[tuple[str, tuple[Edit, ...]]]:
    other = node.orelse[0] if len(node.orelse) == 1 else None if node.orelse else after
    if len(node.body) != 1 or other is None:
        return []
    then, segment = node.body[0], functools.partial(ast.get_source_segment, source)
    if isinstance(then, ast.Return) and isinstance(other, ast.Return) and then.value and other.value:
        head, values = "return ", (then.value, other.value)
    elif (node.orelse and isinstance(then, ast.Assign) and isinstance(other, ast.Assign)  # an else: both assign
          and _target(then) and _target(then) == _target(other)):
        head, values = f"{_target(then)} = ", (then.value, other.value)
    else:
        return []
    text = f"{head}torch.cond({segment(node.test)}, lambda: {segment(values[0])}, lambda: {segment(values[1])})"
    end = other.end_lineno or other.lineno
    return [(text, (Edit(node.lineno, end - node.lineno + 1, " " * node.col_offset + text),))]


# a guard on a tensor's truth value (`if tensor:`): only torch.cond keeps both outcomes
_TENSOR_TRUTH = re.compile(r"data-dependent expression Eq\(u\d+, 1\)|Data-dependent branching")


def _statement_at(source: str, line: int) -> ast.stmt | None:
    return next((n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.stmt) and n.lineno == line), None)


def verified_fixes(runner: VariantRunner, found: Found, kind: ExportFailureKind, failed: ExportEvent,
                   line: SourceLoc | None) -> tuple[ExportFix, ...]:
    script = runner.call.script.resolve()
    source = script.read_text()
    if kind is ExportFailureKind.DATA_DEPENDENT:
        if line is None or Path(line.file).resolve() != script:
            found.notes.append("no fix was tried: the failing line is not in the script itself")
            return ()
        branch = cond_candidates(source, line.line)
        tensor_truth = _TENSOR_TRUTH.search(failed.message)
        candidates = branch if tensor_truth else guard_candidates(source, line.line) + branch
    elif kind is ExportFailureKind.CONSTRAINT_VIOLATION:
        candidates = dim_candidates(source, failed.message)
    else:
        return ()
    fixes: list[ExportFix] = []
    for number, (text, edits) in enumerate(candidates, 1):
        runner.reporter.status(f"trying a fix in a copy of the script: {text}")
        fixes.append(_verify(runner, found, number, source, text, edits, failed))
        if fixes[-1].script_passed:  # else the next candidate may fit the program better (the branch it takes)
            break
    return tuple(fixes)


def _verify(runner: VariantRunner, found: Found, number: int, source: str, text: str, edits: tuple[Edit, ...],
            failed: ExportEvent) -> ExportFix:
    call = runner.call
    fix_dir = call.out_dir / "export-fix" / str(number)
    fix_dir.mkdir(parents=True, exist_ok=True)
    copy = fix_dir / call.script.name
    copy.write_text(apply_edits(source, edits))
    path = os.pathsep.join(p for p in (str(call.script.resolve().parent), os.environ.get("PYTHONPATH", "")) if p)
    fix_call = ScriptCall(copy, call.args, fix_dir, call.timeout_s, {**call.env, "PYTHONPATH": path})
    fix_runner = VariantRunner(fix_call, 1, runner.reporter)
    try:
        attempt = fix_runner.submit(Variant(f"fix-{number}")).result()
    finally:
        fix_runner.close()
    found.attempts.append(attempt)
    try:
        events = read_lines(fix_runner.run_dir(attempt.label) / EVENTS_FILE, ExportEvent)
    except RecordError:
        events = []
    verified = any(e.index == failed.index and e.step is failed.step and e.phase is Phase.PASSED for e in events)
    passed = verified and attempt.outcome == "pass"
    outcome = ("the export passes and the script then passed" if passed else
               f"the export passes; the script then fails: {attempt.error}" if verified else
               f"still fails: {attempt.error or attempt.outcome}")
    first = edits[-1]  # the change at the line torch pointed at (an inserted definition comes before it)
    at = SourceLoc(str(call.script), first.line, "", source.splitlines()[first.line - 1].strip())
    return ExportFix(text, at, first.replaces, verified, outcome, script_passed=passed)

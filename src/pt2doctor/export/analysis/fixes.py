"""Source changes that fix an export tracing failure, as edits of the script's text. Pure: no runs.

Contract: each `*_candidates` function returns `(text, edits)` pairs, most likely first, for one kind
of failure at the user's line: `guard_candidates` (`torch._check` of an `if`/`while` condition, then of
its negation: the fact the branch relies on, asserted where torch.export records it as a runtime
check), `cond_candidates` (a two-way branch rewritten as one `torch.cond`), `dim_candidates` (torch's
"Suggested fixes" for a constraint violation, in place of the script's `Dim` definitions).
`is_tensor_truth(message)`: the guard is on a tensor's truth value, which only `torch.cond` keeps.
The one rule of which candidates a failure gets, in which order, is `data_dependent_candidates` (a
tensor's truth value: the `torch.cond` only, as `torch._check` takes no tensor; else `torch._check` of the
branch the example inputs took, or of both when that is unknown, then the `torch.cond`) and
`failure_candidates` (by the failure's kind). `apply_edits` writes them into the source. `diagnose`
verifies them one at a time, `explain --try-fixes` the first of every issue together
(`export.diagnose.verify`); `explain` proposes them for every issue draft_export reports
(`export.analysis.issues`).
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass

from pt2doctor.model.export import ExportFailureKind


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
_TENSOR_TRUTH = re.compile(r"data-dependent expression Eq\(u\d+, 1\)|Data-dependent branching|^Eq\(u\d+, 1\)$")


def is_tensor_truth(message: str) -> bool:
    """`message`: torch's error, or draft_export's expression (`Eq(u0, 1)`)."""
    return _TENSOR_TRUTH.search(message) is not None


def data_dependent_candidates(source: str, line: int, message: str,
                              took: bool | None = None) -> list[tuple[str, tuple[Edit, ...]]]:
    """The changes for a data-dependent guard at `line` (`message`: torch's error or draft_export's
    expression), most likely first. `took`: the branch the example inputs took (None: unknown, both are
    candidates, the condition first)."""
    branch = cond_candidates(source, line)
    if is_tensor_truth(message):
        return branch
    checks = guard_candidates(source, line)
    return (checks if took is None else checks[:1] if took else checks[1:]) + branch


def failure_candidates(kind: ExportFailureKind, source: str, line: int | None,
                       message: str) -> list[tuple[str, tuple[Edit, ...]]]:
    """The changes for a failed export call of the kind `kind` (`line`: the user's line in `source`)."""
    if kind is ExportFailureKind.DATA_DEPENDENT and line is not None:
        return data_dependent_candidates(source, line, message)
    if kind is ExportFailureKind.CONSTRAINT_VIOLATION:
        return dim_candidates(source, message)
    return []


def _statement_at(source: str, line: int) -> ast.stmt | None:
    return next((n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.stmt) and n.lineno == line), None)

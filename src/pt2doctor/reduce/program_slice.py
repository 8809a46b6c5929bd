"""The program cut down to what its failure can depend on: the program reducer's first candidate (issue #38).

Contract: `relevant_part(source, lines) -> str | None` keeps, of the module's top-level statements, those that
hold one of `lines` (the failing line and the other lines of the script in the failing traceback, the script's own
check), those that compile (`program_keep.calls_a_compiler`), those that seed an RNG, and, to a fixed point, every
statement that feeds something into a kept one: one that binds a name a kept statement reads (an assignment, a
`def`, a `class`, an import), or one that changes an object a kept statement reads (a method call on it, an
attribute or item assigned on it: `model.eval()`, `x.requires_grad_()`). Everything else is left out, as written
(the kept lines are the text as it stands). None when it would keep everything. It reads the source only;
whether the cut program still fails the same way is the reducer's check (`reduce.program`), one check for what
statement-by-statement deletion (`reduce.program_text`) would find in one check per statement.
A name is what an `ast.Name` loads or binds at any depth of a statement (a function's body reads the globals it
uses); a name read but bound nowhere in the module is a builtin's and binds nothing.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from pt2doctor.reduce.program_keep import calls_a_compiler, seeds_rng


def relevant_part(source: str, lines: Iterable[int]) -> str | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    body = tree.body
    wanted = set(lines)
    keep = {i for i, stmt in enumerate(body) if _holds(stmt, wanted) or calls_a_compiler(stmt) or seeds_rng(stmt)}
    binds = [_bound(stmt) for stmt in body]
    changes = [_changed(stmt) for stmt in body]
    reads = [_read(stmt) for stmt in body]
    while True:
        needed = set().union(*(reads[i] for i in keep)) if keep else set()
        more = {i for i in range(len(body)) if i not in keep and (binds[i] & needed or changes[i] & needed)}
        if not more:
            break
        keep |= more
    if len(keep) == len(body) or not keep:
        return None
    text = source.splitlines(keepends=True)
    out: list[str] = []
    for i, stmt in enumerate(body):
        if i in keep:
            first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])
            out += text[first - 1:stmt.end_lineno]
    return "".join(out)


def _holds(stmt: ast.stmt, lines: set[int]) -> bool:
    return any(stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno) for line in lines)


def _bound(stmt: ast.stmt) -> set[str]:
    """The module-level names the statement binds."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}


def _read(stmt: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _changed(stmt: ast.stmt) -> set[str]:
    """The names of objects an expression statement or an attribute/item assignment changes in place: the root of
    a method call's receiver (`model.eval()`), of an assigned attribute or item (`model.fc.weight = ...`)."""
    roots: set[str] = set()
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute):
        roots.add(_root(stmt.value.func.value))
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(
        stmt, (ast.AugAssign, ast.AnnAssign)) else []
    roots |= {_root(t) for t in targets if isinstance(t, (ast.Attribute, ast.Subscript))}
    return roots - {""}


def _root(node: ast.expr) -> str:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else ""

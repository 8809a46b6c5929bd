"""The source changes a workaround makes to a copy of the user's script; pure text in, text out.

Contract: every change edits the text in place (the rest of the file stays byte for byte as written, so its
patch is the change alone) and is None where it does not apply, or where the script never imports `torch` by
that name:
- `disable_call(source, line, call)`: the calls at `line` of the culprit's name (`torch.sigmoid`, `x.cos`,
  `F.relu`) made through `torch.compiler.disable(...)`: Dynamo breaks the graph around those calls alone;
- `disable_function(source, line)`: `@torch.compiler.disable` on the innermost function holding `line`;
- `pin_backend_in_place(source, backend)`: `backend=` written into every `torch.compile` call and bare decorator;
- `set_config(source, module, line)`: `import module` and the assignment `line` after the script's last top-level
  import (before its code runs, as a config must be);
- `skip_decompositions(source)`: every one-line `X.run_decompositions(...)` call made `X`: the exported program as
  traced, its ops not decomposed;
- `own_settings(source)`: the compiler settings the script makes itself (assignments alone on their line to a
  key of one of torch's compiler configs, `model.torch_text.CONFIG_MODULES`, through the module's name or an
  alias it imported at its top and never rebinds), as (line, text), but a `..._TESTING_ONLY` key (torch's bug
  injection, the stand-in for a compiler bug in tests: leaving it out removes the bug under study, no
  workaround); `leave_out(source, line)`: that statement commented out (a `pass` where it was its block's only
  statement), so the key keeps torch's default;
- `uncompile(source)`: for each `torch.compile` site (a one-line call, a decorator on its own line), the script
  with that one site compiling nothing (`torch.compile(f, ...)` -> `f`, the decorator removed), and the site.
`unified_patch(before, after, name)` is the change as a unified diff the user applies to their own file.
`diagnose.workarounds` tries each change on a copy of the script.
"""

from __future__ import annotations

import ast
import difflib

from pt2doctor.model.torch_text import CONFIG_MODULES

DISABLE = "@torch.compiler.disable"


def _tree(source: str) -> ast.Module | None:
    """The script's AST, where it parses and imports `torch` by that name."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    imports = any(isinstance(n, ast.Import) and any(a.name == "torch" and a.asname is None for a in n.names)
                  for n in tree.body)
    return tree if imports else None


def _replaced(source: str, edits: list[tuple[ast.expr, str]]) -> str:
    """`source` with each node's text (one line each; AST columns are UTF-8 byte offsets) replaced, from the end."""
    lines = source.splitlines(keepends=True)
    for node, text in sorted(edits, key=lambda e: (e[0].lineno, e[0].col_offset), reverse=True):
        raw = lines[node.lineno - 1].encode()
        lines[node.lineno - 1] = (raw[:node.col_offset] + text.encode() + raw[node.end_col_offset:]).decode()
    return "".join(lines)


def _segment(source: str, node: ast.AST) -> str:
    return ast.get_source_segment(source, node) or ast.unparse(node)


def disable_call(source: str, line: int, call: str) -> str | None:
    """`source` with the calls at `line` named as `call`'s last part made through `torch.compiler.disable`."""
    tree = _tree(source)
    if tree is None:
        return None
    name = call.rsplit(".", 1)[-1]  # as the line spells it: `F.relu`, `torch.relu`, `x.relu`, `relu`
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.func.lineno == line == n.func.end_lineno
             and ((isinstance(n.func, ast.Attribute) and n.func.attr == name)
                  or (isinstance(n.func, ast.Name) and n.func.id == name))]
    if not calls:
        return None
    return _replaced(source, [(c.func, f"torch.compiler.disable({_segment(source, c.func)})") for c in calls])


def pin_backend_in_place(source: str, backend: str) -> str | None:
    """`source` with `backend=` in every `torch.compile(...)` call and bare `@torch.compile` decorator, each edited
    where it stands. `reduce.program.pin_backend` pins a reduced program, which is unparsed text already; a patch of
    the user's own file must change those lines alone, so this one never re-renders the file."""
    tree = _tree(source)
    if tree is None:
        return None
    edits: list[tuple[ast.expr, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "torch.compile" and node.lineno == node.end_lineno:
            kept = [_segment(source, a) for a in node.args]
            kept += [_segment(source, k) for k in node.keywords if k.arg != "backend"]
            edits.append((node, f"torch.compile({', '.join([*kept, f'backend={backend!r}'])})"))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            edits += [(d, f"torch.compile(backend={backend!r})") for d in node.decorator_list
                      if ast.unparse(d) == "torch.compile"]
    return _replaced(source, edits) if edits else None


def disable_function(source: str, line: int) -> tuple[str, str] | None:
    """`source` with the function holding `line` disabled, and that function's name."""
    tree = _tree(source)
    if tree is None:
        return None
    holders = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
               and n.lineno <= line <= (n.end_lineno or n.lineno)]
    if not holders:
        return None
    function = max(holders, key=lambda n: n.lineno)  # the innermost
    if any(ast.unparse(d).startswith("torch.compiler.disable") for d in function.decorator_list):
        return None
    first = min([function.lineno, *(d.lineno for d in function.decorator_list)])
    lines = source.splitlines(keepends=True)
    indent = lines[first - 1][:len(lines[first - 1]) - len(lines[first - 1].lstrip())]
    return "".join([*lines[:first - 1], f"{indent}{DISABLE}\n", *lines[first - 1:]]), function.name


def unified_patch(before: str, after: str, name: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        fromfile=name, tofile=name))


def set_config(source: str, module: str, line: str) -> str | None:
    """`source` with `import module` and `line` inserted after its last top-level import statement."""
    tree = _tree(source)
    if tree is None:
        return None
    last = max((n.end_lineno or n.lineno for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))), default=0)
    lines = source.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    return "".join([*lines[:last], f"import {module}\n", f"{line}\n", *lines[last:]])


def uncompile(source: str) -> list[tuple[str, str, int]]:
    """Per `torch.compile` site, in source order: (the script with that site compiling nothing, the site's text,
    its line)."""
    tree = _tree(source)
    if tree is None:
        return []
    lines = source.splitlines(keepends=True)
    out: list[tuple[str, str, int]] = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and ast.unparse(node.func) == "torch.compile" and node.args
                and node.lineno == node.end_lineno):
            out.append((_replaced(source, [(node, _segment(source, node.args[0]))]), _segment(source, node),
                        node.lineno))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in node.decorator_list:
                text = lines[d.lineno - 1].strip()
                if d.lineno == d.end_lineno and text == "@" + _segment(source, d) and _segment(source, d).startswith(
                        "torch.compile") and not _segment(source, d).startswith("torch.compiler"):
                    out.append(("".join(lines[:d.lineno - 1] + lines[d.lineno:]), f"{text} on `{node.name}`", d.lineno))
    return sorted(out, key=lambda site: site[2])


def skip_decompositions(source: str) -> str | None:
    """`source` with every one-line `X.run_decompositions(...)` call replaced by `X`."""
    tree = _tree(source)
    if tree is None:
        return None
    edits: list[tuple[ast.expr, str]] = [
        (n, _segment(source, n.func.value)) for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "run_decompositions"
        and n.lineno == n.end_lineno]
    return _replaced(source, edits) if edits else None


def own_settings(source: str) -> list[tuple[int, str]]:
    tree = _tree(source)
    if tree is None:
        return []
    modules = set(CONFIG_MODULES.values())
    names = {module: module for module in modules}  # how the script spells each module, imported at its top
    for node in tree.body:
        if isinstance(node, ast.Import):
            names.update({a.asname: a.name for a in node.names if a.asname and a.name in modules})
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names
                          if f"{node.module}.{a.name}" in modules})
    rebound = {t.id for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
               for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
    spellings = [name for name in names if name.split(".")[0] not in rebound]
    lines = source.splitlines()
    settings = []
    for assign in (n for n in ast.walk(tree) if isinstance(n, ast.Assign)):
        if not (len(assign.targets) == 1 and isinstance(assign.targets[0], ast.Attribute)
                and _alone_on_its_line(lines, assign)):
            continue
        target = ast.unparse(assign.targets[0])
        if any(target.startswith(f"{name}.") for name in spellings) and not target.endswith("_TESTING_ONLY"):
            settings.append((assign.lineno, _segment(source, assign)))
    return sorted(settings)


def _alone_on_its_line(lines: list[str], node: ast.stmt) -> bool:
    """One line, holding this statement and at most a comment after it (no `;`, no `if x: ...` around it)."""
    if node.lineno != node.end_lineno:
        return False
    line = lines[node.lineno - 1].encode()
    before, after = line[:node.col_offset].decode(), line[node.end_col_offset or 0:].decode().strip()
    return not before.strip() and (not after or after.startswith("#"))


def leave_out(source: str, line: int) -> str:
    lines = source.splitlines(keepends=True)
    text = lines[line - 1]
    indent = text[:len(text) - len(text.lstrip())]
    alone = any(isinstance(body, list) and len(body) == 1 and isinstance(body[0], ast.stmt)
                and body[0].lineno == line
                for node in ast.walk(ast.parse(source)) for _, body in ast.iter_fields(node))
    kept = f"{indent}pass  # {text.strip()}\n" if alone else f"{indent}# {text.lstrip()}"
    return "".join([*lines[:line - 1], kept, *lines[line:]])

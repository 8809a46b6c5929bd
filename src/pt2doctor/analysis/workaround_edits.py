"""The source changes a workaround makes to a copy of the user's script; pure text in, text out.

Contract: every change edits the text in place (the rest of the file stays byte for byte as written, so its
patch is the change alone) and is None where it does not apply, or where the script never imports `torch` by
that name:
- `disable_call(source, line, call)`: the calls at `line` of the culprit's name (`torch.sigmoid`, `x.cos`,
  `F.relu`) made through `torch.compiler.disable(...)`: Dynamo breaks the graph around those calls alone;
- `calls_named(source, names)`: where the script calls each of `names` as written (a reduced program's culprit
  calls), outside `with` items;
- `disable_operator(source, line, call)`: where the culprit is an operator (`a // b`, `x @ w`: the call `operator.
  floordiv`), its uses at `line` made calls of `torch.compiler.disable(operator.floordiv)` (`import operator` added
  where the script lacks it): Dynamo breaks the graph around that operation alone;
- `disable_line_call(source, line, module)`: the call at `line` of the module the culprit ran under (`gn(t)`), else
  the line's only call (`d.sample()`), made so, where the culprit's name is not on its line;
- `fullgraph_everywhere(source)`: every `torch.compile` site refuses a graph break (`fullgraph=True`): no call can be
  kept out of its graph;
- `disable_function(source, line)`: `@torch.compiler.disable` on the innermost function holding `line`, unless a
  `torch.compile` site compiles that function itself (`torch.compile(f)` compiles `f` disabled or not; the
  decorator's site is `uncompile`'s);
- `pin_backend_in_place(source, backend)`: `backend=` written into every `torch.compile` call and bare decorator;
- `set_config(source, module, line, *more)`: `import module` and the assignment `line` (and more such pairs) after
  the script's last top-level import (before its code runs, as a config must be);
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
from collections.abc import Sequence

from pt2doctor.model.torch_text import CONFIG_MODULES, OPERATORS, operator_use

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


def calls_named(source: str, names: Sequence[str]) -> list[tuple[str, int]]:
    """(name, line) for each call in `source` spelled as one of `names` (`x.mul_`, `torch.cat`: a reduced program's
    culprit calls, as its text, which is the script's; an operator's use, `x @ w` for `operator.matmul`), in the
    names' order, then the lines'; a call that is a `with` item (`torch.no_grad()`) is left out: kept out of the
    graph it would guard nothing."""
    tree = _tree(source)
    if tree is None:
        return []
    managers = {id(item.context_expr) for n in ast.walk(tree) if isinstance(n, (ast.With, ast.AsyncWith))
                for item in n.items}
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and id(n) not in managers
             and n.func.lineno == n.func.end_lineno]
    operators = [(f"operator.{use[0]}", n.lineno) for n in ast.walk(tree)
                 if isinstance(n, ast.expr) and n.lineno == n.end_lineno and (use := operator_use(n)) is not None]
    return [(name, line) for name in names
            for line in sorted({c.func.lineno for c in calls if _segment(source, c.func) == name}
                               | {at for spelled, at in operators if spelled == name})]


def disable_operator(source: str, line: int, call: str) -> str | None:
    """`source` with the operations at `line` of the operator `call` names (`operator.floordiv`: `a // b`) made
    through `torch.compiler.disable(operator.floordiv)`, the innermost where they nest; `import operator` added after
    the script's last top-level import where it lacks one."""
    module, _, name = call.rpartition(".")
    tree = _tree(source)
    if module not in ("operator", "_operator") or name not in OPERATORS or tree is None:
        return None
    uses = {n: use[1] for n in ast.walk(tree) if isinstance(n, ast.expr) and n.lineno == line == n.end_lineno
            and (use := operator_use(n)) is not None and use[0] == name}
    inner = [n for n in uses if not any(other is not n and other in set(ast.walk(n)) for other in uses)]
    if not inner:
        return None
    edited = _replaced(source, [(n, f"torch.compiler.disable(operator.{name})("
                                    f"{', '.join(_segment(source, o) for o in uses[n])})") for n in inner])
    if any(isinstance(n, ast.Import) and any(a.name == "operator" and a.asname is None for a in n.names)
           for n in tree.body):
        return edited
    return _after_imports(edited, tree, "import operator\n")


def _after_imports(source: str, tree: ast.Module, text: str) -> str:
    """`text` inserted after the last top-level import statement of `tree` (the AST of `source`'s lines as they were
    above any edit on the same line count)."""
    last = max((n.end_lineno or n.lineno for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))), default=0)
    lines = source.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    return "".join([*lines[:last], text, *lines[last:]])


def disable_line_call(source: str, line: int, module: str = "") -> tuple[str, str] | None:
    """Where the culprit's own name is not on its line (a module's call, `gn(t)`; a library's method,
    `d.sample()`, that ran the op): the call at `line` spelled as `module` (`self.sub`, `gn`: the module the op ran
    under), else the line's only call, made through `torch.compiler.disable`; with that call as written."""
    tree = _tree(source)
    if tree is None:
        return None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.lineno == line == n.end_lineno]
    named = [c for c in calls if module and _segment(source, c.func) == module]
    chosen = named or (calls if len(calls) == 1 else [])
    if not chosen:
        return None
    func = _segment(source, chosen[0].func)
    return _replaced(source, [(c.func, f"torch.compiler.disable({func})") for c in chosen]), func


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
    if any(ast.unparse(d).startswith("torch.compiler.disable") for d in function.decorator_list) or \
            _compiled_itself(source, tree, function):
        return None
    first = min([function.lineno, *(d.lineno for d in function.decorator_list)])
    lines = source.splitlines(keepends=True)
    indent = lines[first - 1][:len(lines[first - 1]) - len(lines[first - 1].lstrip())]
    return "".join([*lines[:first - 1], f"{indent}{DISABLE}\n", *lines[first - 1:]]), function.name


def unified_patch(before: str, after: str, name: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        fromfile=name, tofile=name))


def set_config(source: str, module: str, line: str, *more: tuple[str, str]) -> str | None:
    """`source` with `import module` and `line` (then each further `(module, line)`) inserted after its last
    top-level import statement, in one edit."""
    tree = _tree(source)
    text = "".join(f"import {m}\n{assignment}\n" for m, assignment in ((module, line), *more))
    return None if tree is None else _after_imports(source, tree, text)


def uncompile(source: str) -> list[tuple[str, str, int]]:
    """Per `torch.compile` site, in source order: (the script with that site compiling nothing, the site's text,
    its line)."""
    tree = _tree(source)
    if tree is None:
        return []
    lines = source.splitlines(keepends=True)
    out: list[tuple[str, str, int]] = []
    for node, site in _sites(source, tree):
        if isinstance(node, ast.Call):
            out.append((_replaced(source, [(node, _segment(source, node.args[0]))]), _segment(source, node),
                        node.lineno))
        else:
            out.append(("".join(lines[:site.lineno - 1] + lines[site.lineno:]),
                        f"{lines[site.lineno - 1].strip()} on `{node.name}`", site.lineno))
    return sorted(out, key=lambda site: site[2])


def _sites(source: str, tree: ast.Module) -> list[tuple[ast.Call | ast.FunctionDef | ast.AsyncFunctionDef, ast.expr]]:
    """Each `torch.compile` site the edits handle: a one-line `torch.compile(f, ...)` call (the call, twice), or a
    decorator on its own line (the function it compiles, the decorator)."""
    lines = source.splitlines()
    sites: list[tuple[ast.Call | ast.FunctionDef | ast.AsyncFunctionDef, ast.expr]] = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and ast.unparse(node.func) == "torch.compile" and node.args
                and node.lineno == node.end_lineno):
            sites.append((node, node))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            sites += [(node, d) for d in node.decorator_list
                      if d.lineno == d.end_lineno and lines[d.lineno - 1].strip() == "@" + _segment(source, d)
                      and _segment(source, d).startswith("torch.compile")
                      and not _segment(source, d).startswith("torch.compiler")]
    return sites


def fullgraph_everywhere(source: str) -> bool:
    """Every `torch.compile` site passes `fullgraph=True`: a call kept out of the graph through
    `torch.compiler.disable` is a graph break, which such a compile refuses (`Unsupported: Attempted to call function
    marked as skipped`)."""
    tree = _tree(source)
    sites = _sites(source, tree) if tree is not None else []
    calls = [site for _, site in sites if isinstance(site, ast.Call)]
    return bool(sites) and len(calls) == len(sites) and all(
        any(k.arg == "fullgraph" and isinstance(k.value, ast.Constant) and k.value.value is True for k in c.keywords)
        for c in calls)


def _compiled_itself(source: str, tree: ast.Module, function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """`function` is what a site compiles (`torch.compile(f)`, `@torch.compile`, the `forward` of a module
    `torch.compile(model)` compiles): `torch.compiler.disable` on it changes nothing (torch.compile unwraps it and
    compiles `f` all the same) or uncompiles that whole site (a module's `forward`)."""
    owner = next((c.name for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and function in c.body), None)
    instances = {t.id: n.value.func.id for n in ast.walk(tree) if isinstance(n, ast.Assign)
                 and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name)
                 for t in n.targets if isinstance(t, ast.Name)}  # `model = Model()`
    for node, _ in _sites(source, tree):
        if node is function:
            return True
        if not isinstance(node, ast.Call):
            continue
        target = node.args[0]
        if isinstance(target, ast.Name) and target.id == function.name:
            return True
        module = (instances.get(target.id) if isinstance(target, ast.Name) else  # the class of what it compiles
                  target.func.id if isinstance(target, ast.Call) and isinstance(target.func, ast.Name) else None)
        if function.name == "forward" and owner is not None and module == owner:
            return True
    return False


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

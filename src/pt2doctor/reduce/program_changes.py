"""What a reduced program changes between two calls of its compiled code: the un-guarded change of a stale result.

Contract: `unguarded_changes(source) -> tuple[StateChange, ...]` reads the program's AST only (nothing
runs). A compiled callable is a name bound to `torch.compile(...)` / `torch._dynamo.optimize(...)(...)`
or a function decorated with one; the compiled code is what `program_culprits` finds from there. Between
the first statement that calls a compiled callable and the last one, in program order, every statement
that writes state is a change:
- an assignment, augmented assignment or `del` of an attribute or item (`Model.m.__code__ = ...`,
  `mod.__dict__["sub"] = ...`), or of a global name;
- `setattr(obj, "a", v)` / `delattr(obj, "a")` (`obj.a`), `object.__setattr__(obj, "a", v)`, which
  bypasses the class's `__setattr__` and writes the instance dictionary (`obj.__dict__['a']`: an
  `nn.Module` keeps its submodules in `_modules`, so this shadows one), and `obj.__dict__.update(...)`.
A change is kept only when the compiled code may read what it writes: its root name is read by the
compiled code, is the object handed to the compiler, or is the class of an instance the compiled code
reads. In a minimal program (`reduce.program`: a statement whose removal keeps the failure is removed)
such a change is one the failure needs: the compiled callable, called again after it, returns what the
state before it gave, because no guard of the frame Dynamo compiled checks what changed.
"""

from __future__ import annotations

import ast

from pt2doctor.model.diagnosis import StateChange
from pt2doctor.reduce.program_culprits import _COMPILERS, _Program, dotted


def unguarded_changes(source: str) -> tuple[StateChange, ...]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ()
    program = _Program(tree)
    compiled = _compiled_names(tree, program)
    statements = _in_order(tree.body)
    calling = [i for i, s in enumerate(statements) if _calls_any(s, compiled)]
    if len(calling) < 2:
        return ()
    read = _free_names(program) | _handed_to_compiler(program, tree) | compiled
    read |= {program.instances[n] for n in list(read) if n in program.instances}
    changes = []
    for stmt in statements[calling[0] + 1:calling[-1]]:
        for path, root in _writes(stmt):
            if root in read:
                changes.append(StateChange(path=path, statement=ast.unparse(stmt), line=stmt.lineno))
    return tuple(dict.fromkeys(changes))


def _in_order(body: list[ast.stmt]) -> list[ast.stmt]:
    """The simple statements of the module level in program order, those inside `with`, `if`, `for`,
    `while` and `try` blocks too (not inside definitions, which run only when called)."""
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        blocks = [getattr(stmt, name, None) for name in ("body", "orelse", "handlers", "finalbody")]
        nested = [s for block in blocks if isinstance(block, list) for s in block if isinstance(s, ast.stmt)]
        handlers = [s for h in getattr(stmt, "handlers", []) for s in h.body]
        out += _in_order(nested + handlers) if nested or handlers else [stmt]
    return out


def _compiled_names(tree: ast.Module, program: _Program) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                _is_compiler(program, d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list):
            names.add(node.name)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _compiles(program, node.value):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _is_compiler(program: _Program, func: ast.expr) -> bool:
    name = dotted(func)
    return name is not None and program.resolve(name) in _COMPILERS


def _compiles(program: _Program, call: ast.Call) -> bool:
    """`torch.compile(f)`, `torch.compile(backend=...)(f)`, `torch._dynamo.optimize(...)(f)`."""
    func = call.func.func if isinstance(call.func, ast.Call) else call.func
    return _is_compiler(program, func)


def _calls_any(stmt: ast.stmt, names: set[str]) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in names for n in ast.walk(stmt))


def _free_names(program: _Program) -> set[str]:
    """The names the compiled code reads from outside (transitively through the program's own
    functions): loaded, and neither a parameter nor a local of the code that loads them."""
    loaded: set[str] = set()
    local: set[str] = set()
    todo: list[ast.AST] = program.roots()
    seen: set[int] = set()
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                (loaded if isinstance(sub.ctx, ast.Load) else local).add(sub.id)
            elif isinstance(sub, ast.arg):
                local.add(sub.arg)
            elif isinstance(sub, ast.Call):
                todo += program.defined(sub.func)
    return loaded - local


def _handed_to_compiler(program: _Program, tree: ast.Module) -> set[str]:
    """The objects handed to the compiler (`torch.compile(model)`: its `forward` reads `model`'s state)."""
    return {a.id for node in ast.walk(tree) if isinstance(node, ast.Call) and _compiles(program, node)
            for a in node.args if isinstance(a, ast.Name)}


def _writes(stmt: ast.stmt) -> list[tuple[str, str]]:
    """(path written, its root name) for each write of state in `stmt`."""
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = [t for target in stmt.targets for t in _flatten(target)]
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        targets = [stmt.target]
    elif isinstance(stmt, ast.Delete):
        targets = list(stmt.targets)
    found = [(ast.unparse(t), _root(t)) for t in targets if isinstance(t, (ast.Attribute, ast.Subscript, ast.Name))]
    found += [w for node in ast.walk(stmt) if isinstance(node, ast.Call) for w in _call_writes(node)]
    return [(path, root) for path, root in found if root]


def _flatten(target: ast.expr) -> list[ast.expr]:
    return [t for e in target.elts for t in _flatten(e)] if isinstance(target, (ast.Tuple, ast.List)) else [target]


def _root(node: ast.expr) -> str:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def _call_writes(call: ast.Call) -> list[tuple[str, str]]:
    name = dotted(call.func) or ""
    if name.endswith(".__dict__.update") and isinstance(call.func, ast.Attribute):
        owner = call.func.value
        return [(ast.unparse(owner), _root(owner))]
    if len(call.args) < 2 or not isinstance(call.args[1], ast.Constant) or not isinstance(call.args[1].value, str):
        return []
    owner, attribute = call.args[0], call.args[1].value
    if name in ("setattr", "delattr"):
        return [(f"{ast.unparse(owner)}.{attribute}", _root(owner))]
    if name == "object.__setattr__":  # bypasses the class's __setattr__: the instance dictionary
        return [(f"{ast.unparse(owner)}.__dict__[{attribute!r}]", _root(owner))]
    if name.endswith(".__setattr__"):
        return [(f"{ast.unparse(owner)}.{attribute}", _root(owner))]
    return []

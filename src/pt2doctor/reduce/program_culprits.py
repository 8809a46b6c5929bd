"""The callables a reduced program calls inside its compiled code: a program repro's `culprit_ops`.

Contract: `compiled_calls(source) -> tuple[str, ...]` reads the program's AST only (nothing runs). The
compiled code is every function that `torch.compile` or `torch._dynamo.optimize` wraps, and every
module `torch.export.export` traces: as a decorator, or as the first argument of a call (a function's
name, a lambda, `obj.method`, a module class's instance or constructor, whose `forward` is compiled). From there it
follows, transitively, calls to functions, methods and classes the program defines (by name: a reduced program is small
and its names are few), and names every other callable in source order, once each, at most `MAX_CALLS`:
- dotted names through the program's imports (`np.cumsum` -> `numpy.cumsum`, `torch.cumsum`);
- a method of a name bound to a list, dict or set display (`state.append` -> `list.append`);
- a builtin (`len`), or the call as written (`x.sin`) when nothing says more;
then, within the same limit, the operators it uses as Dynamo names their calls (`x @ w`: `operator.matmul`), which a
workaround can keep out of the graph as calls (`analysis.workaround_edits.disable_operator`).
"""

from __future__ import annotations

import ast
import builtins
from typing import TypeVar

from pt2doctor.model.torch_text import operator_use

MAX_CALLS = 8
_COMPILERS = {"torch.compile", "torch._dynamo.optimize", "torch.export.export", "torch.export.draft_export"}
_DISPLAYS = {ast.List: "list", ast.ListComp: "list", ast.Dict: "dict", ast.DictComp: "dict", ast.Set: "set",
             ast.SetComp: "set"}
_Def = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
_SKIPPED = {"staticmethod", "classmethod", "property", "super", "dataclasses.dataclass"}


def compiled_calls(source: str) -> tuple[str, ...]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ()
    program = _Program(tree)
    names: list[str] = []
    operators: list[str] = []
    seen: set[int] = set()
    todo: list[ast.AST] = program.roots()
    while todo:
        node = todo.pop(0)
        if id(node) in seen:
            continue
        seen.add(id(node))
        found: list[str | None] = [program.describe(d) for d in getattr(node, "decorator_list", ())]
        for call in sorted(_within(node, ast.Call), key=lambda c: (c.lineno, c.col_offset)):
            callees = program.defined(call.func)
            todo += callees + [f for arg in call.args for f in program.functions_named(arg)]  # grad(loss), map(f, xs)
            found.append(program.describe(call.func, defined=bool(callees)))
        names += [n for n in found if n and n not in names and n not in _SKIPPED]
        operators += [f"operator.{use[0]}" for expr in sorted(_within(node, ast.expr), key=lambda e: (e.lineno,
                                                                                                     e.col_offset))
                      if (use := operator_use(expr)) is not None]
    return tuple(dict.fromkeys([*names, *operators]))[:MAX_CALLS]


_Node = TypeVar("_Node", bound=ast.AST)


def _within(node: ast.AST, kind: type[_Node]) -> list[_Node]:
    """The nodes of `kind` in the compiled code `node` is: a function's body, a lambda's, or an expression."""
    if isinstance(node, ast.Lambda):
        body: list[ast.AST] = [node.body]
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        body = list(node.body)
    else:  # an expression that is compiled: torch.compile(torch.func.grad(loss))
        body = [node]
    return [n for stmt in body for n in ast.walk(stmt) if isinstance(n, kind)]


# nn.Module methods that return the module itself: `Model().eval()` is still a `Model`
_RETURN_SELF = {"eval", "train", "to", "cuda", "cpu", "float", "half", "double", "bfloat16", "requires_grad_"}


def _constructed(value: ast.expr) -> ast.expr:
    while (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _RETURN_SELF
           and isinstance(value.func.value, ast.Call)):
        value = value.func.value
    return value


def dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


class _Program:
    """The program's definitions, imports and display-bound names, by name."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.functions: dict[str, list[_Def]] = {}
        self.classes: dict[str, list[ast.ClassDef]] = {}
        self.imports: dict[str, str] = {}
        self.displays: dict[str, str] = {}
        self.instances: dict[str, str] = {}  # name -> the program's class it was bound to an instance of
        self.made: dict[str, ast.Call] = {}  # name -> the other call it was bound to the result of
        for node in ast.walk(tree):
            self._note(node)

    def _note(self, node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.functions.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.ClassDef):
            self.classes.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                self.imports[alias.asname or root] = alias.name if alias.asname else root
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                self.imports[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
            if type(value) in _DISPLAYS:
                self.displays[name] = _DISPLAYS[type(value)]
            value = _constructed(value)
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in self.classes:
                self.instances[name] = value.func.id
            elif isinstance(value, ast.Call):
                self.made[name] = value

    def resolve(self, name: str) -> str:
        root, _, rest = name.partition(".")
        full = self.imports.get(root, root)
        return f"{full}.{rest}" if rest else full

    def roots(self) -> list[ast.AST]:
        roots: list[ast.AST] = []
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                    self._compiler(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list):
                roots.append(node)
            elif isinstance(node, ast.Call) and node.args and self._compiler(node.func):
                roots += self._compiled(node.args[0])
            elif isinstance(node, ast.Call) and node.args and self._factory(node.func):
                roots += self._compiled(node.args[0])  # torch._dynamo.optimize("eager")(fn)
        return roots

    def _compiler(self, func: ast.expr) -> bool:
        name = dotted(func)
        return name is not None and self.resolve(name) in _COMPILERS

    def _factory(self, func: ast.expr) -> bool:
        """A compiler called without the function, returning what compiles it: `torch.compile(backend=...)`,
        `torch._dynamo.optimize(...)` (not `torch.compile(fn)`, whose call runs `fn`)."""
        if not isinstance(func, ast.Call) or not self._compiler(func.func):
            return False
        return not func.args or self.resolve(dotted(func.func) or "") == "torch._dynamo.optimize"

    def _compiled(self, arg: ast.expr) -> list[ast.AST]:
        if isinstance(arg, ast.Lambda):
            return [arg]
        if isinstance(arg, ast.Call) and not (isinstance(arg.func, ast.Name) and arg.func.id in self.classes):
            return [arg]  # a transform of the program's function: torch.func.grad(loss)
        if isinstance(arg, ast.Call):  # torch.compile(Model())
            arg = arg.func
        if isinstance(arg, ast.Name) and (arg.id in self.classes or arg.id in self.instances):
            return list(self._methods(self.instances.get(arg.id, arg.id), "forward"))
        if isinstance(arg, ast.Name) and arg.id in self.made and not self.defined(arg):
            return [self.made[arg.id]]  # what made it: torch.export.unflatten(ep), torch.func.grad(f)
        return list(self.defined(arg))

    def functions_named(self, arg: ast.expr) -> list[_Def]:
        return list(self.functions.get(arg.id, [])) if isinstance(arg, ast.Name) else []

    def _methods(self, cls: str, name: str | None) -> list[_Def]:
        return [f for c in self.classes.get(cls, []) for f in c.body
                if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and name in (None, f.name)]

    def defined(self, func: ast.expr) -> list[_Def]:
        """The program's own definitions a call to `func` may run (a class: its methods `__init__`, `forward`)."""
        if isinstance(func, ast.Name) and func.id in self.classes:
            return self._methods(func.id, "__init__") + self._methods(func.id, "forward")
        if isinstance(func, ast.Name):
            return list(self.functions.get(func.id, []))
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in self.classes:
            return self._methods(func.value.id, None)  # SinWithZeroBackward.apply: the class's methods run
        if isinstance(func, ast.Attribute) and (dotted(func) or "").split(".")[0] not in self.imports:
            return list(self.functions.get(func.attr, []))
        return []

    def describe(self, func: ast.expr, defined: bool = False) -> str | None:
        """How a callable is named in `culprit_ops`; None for the program's own functions."""
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            owner = func.value.id
            if owner in self.displays:
                return f"{self.displays[owner]}.{func.attr}"
            if owner in self.classes:  # a program class's inherited method: its base's (Function.apply)
                bases = [dotted(b) for c in self.classes[owner] for b in c.bases]
                return next((f"{self.resolve(b)}.{func.attr}" for b in bases if b and b.split(".")[0] in self.imports),
                            None)
            if owner in self.instances and not defined:
                return f"{self.instances[owner]}.{func.attr}"
        if defined:
            return None
        name = dotted(func)
        if name is None:
            return f".{func.attr}" if isinstance(func, ast.Attribute) else None
        if "." not in name and name not in self.imports:
            return name if hasattr(builtins, name) else None  # a local callable the program did not define here
        return self.resolve(name)

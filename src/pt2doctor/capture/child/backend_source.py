"""The backend the user passed to `torch.compile`, as a `BackendSpec` a repro can rebuild it from.

Contract: `backend_spec(compiler_fn)` takes Dynamo's compiler function (its wrappers included) and
returns one of:
- `NAMED`: a registered backend (`"inductor"`, `"aot_eager"`, ...), kept as its name;
- `SOURCE`: standalone Python that, run after `import torch` in a fresh interpreter with plain
  torch, binds `spec.name` to an equivalent backend. It holds, in dependency order: the imports the
  code needs, then the definitions it reaches from its module (transitively), then the backend:
  - a function: its source (a lambda: `name = lambda ...`);
  - an `aot_autograd(...)` backend: its compilers' sources and
    `name = aot_autograd(fw_compiler=..., ...)` (`torch._dynamo.backends.common.aot_autograd`);
  - a callable class instance: its class's source and `name = Cls(...)` rebuilding its
    `__dict__` (`Cls(k=v)` where `__init__` only stores its arguments, else through `__new__`).
  A module-level name the code reads is captured when it is: a function or class defined in the
  same module (`inspect.getsource`, then its own names in turn), a simple literal (int, float,
  str, bytes, bool, None, and tuple/list/set/frozenset/dict of those: `repr`, sets sorted so the
  text is stable), a module (`import`), or a function/class importable from another module (the
  script's own import line for it where it has one). Closure cells count as module names.
  `spec.name` is the user's own name for the backend: the variable that holds it in the script,
  else the function's name, else one derived from the class;
- `STUB`: when any part cannot be written as source, `spec.source` is the message the repro's stub
  raises (`backend 'name': source unavailable (why)`), so a repro still fails the same clear way.
Nothing here runs user code: values are only read (`__dict__`, closure cells, module globals).
Which names a snippet reads is decided by `symtable`, so locals and builtins never pull in globals.
"""

from __future__ import annotations

import ast
import inspect
import math
import re
import symtable
import sys
import textwrap
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pt2doctor.capture import torch_compat
from pt2doctor.model.minify import BackendKind, BackendSpec

_LITERAL_ATOMS = (bool, int, float, complex, str, bytes, type(None))
_MAX_LITERAL_CHARS = 100_000  # a literal bigger than this is data, not configuration


class Uncapturable(Exception):
    """Part of the backend cannot be written as source; the message says which and why."""


def backend_spec(compiler_fn: Any) -> BackendSpec:
    """Dynamo's compiler function (wrappers and all) -> the user's backend as a `BackendSpec`."""
    chain = torch_compat.backend_chain(compiler_fn)
    name = getattr(chain[0], "__name__", None) or type(chain[-1]).__name__
    innermost = chain[-1]
    registered = torch_compat.registered_backends()
    if name == "inductor" or registered.get(name) is innermost:
        return BackendSpec(BackendKind.NAMED, name)
    return callable_backend_spec(innermost)


def callable_backend_spec(backend: Any) -> BackendSpec:
    """A user backend (function, `aot_autograd(...)`, callable instance) as source, or a stub."""
    name = _user_name(backend)
    try:
        builder = _SourceBuilder()
        source = builder.backend(backend, name)
    except Uncapturable as exc:
        return BackendSpec(BackendKind.STUB, name, f"backend {name!r}: source unavailable ({exc})")
    return BackendSpec(BackendKind.SOURCE, name, source)


@dataclass
class _SourceBuilder:
    """Collects imports and definitions (post-order, so a name is bound before it is used)."""

    imports: list[str] = field(default_factory=list)
    definitions: list[str] = field(default_factory=list)
    bound: dict[str, Any] = field(default_factory=dict)  # name -> the object it stands for

    def backend(self, backend: Any, name: str) -> str:
        kwargs = torch_compat.aot_autograd_kwargs(backend)
        if kwargs is not None:
            self._add_import("from torch._dynamo.backends.common import aot_autograd")
            args = ", ".join(f"{k}={self.value(v, _namespaces(backend, kwargs))}" for k, v in kwargs.items())
            self._define(name, backend, f"{name} = aot_autograd({args})")
        elif inspect.isfunction(backend) and backend.__name__ == "<lambda>":
            self._define(name, backend, f"{name} = {self._lambda_source(backend)}")
        elif inspect.isfunction(backend):
            self.function(backend)
        elif (isinstance(getattr(type(backend), "__dict__", None), Mapping) and callable(backend)
              and not isinstance(backend, type)):
            self._define(name, backend, f"{name} = {self._construction(backend)}")
        else:
            raise Uncapturable(f"a {type(backend).__name__} is neither a function nor a class instance")
        parts = ["\n".join(self.imports)] if self.imports else []
        return "\n\n\n".join(parts + [d.strip("\n") for d in self.definitions]) + "\n"

    def value(self, value: Any, namespaces: list[Mapping[str, Any]], name: str | None = None) -> str:
        """Source for `value` as an expression; definitions and imports it needs are added."""
        literal = _literal_source(value)
        if literal is not None:
            return literal
        if isinstance(value, types.ModuleType):
            alias = name or value.__name__.rpartition(".")[2]
            self._add_import(f"import {value.__name__}" if alias == value.__name__
                             else f"import {value.__name__} as {alias}")
            return alias
        defined_here = _defined_in(value, namespaces)
        line = None if defined_here or name is None else _script_import(namespaces, name, value)
        if line is not None:
            self._add_import(line)
            return name  # type: ignore[return-value]
        if defined_here and inspect.isfunction(value) and value.__name__ != "<lambda>":
            return self.function(value)
        if defined_here and inspect.isclass(value):
            return self.cls(value)
        line = None if defined_here else _import_line(value, name)
        if line is not None:
            self._add_import(line)
            return name or value.__name__
        raise Uncapturable(f"{name or 'a value'} (type {type(value).__qualname__}) cannot be written as source")

    def function(self, fn: types.FunctionType) -> str:
        if self._already_bound(fn.__name__, fn):
            return fn.__name__
        self.bound[fn.__name__] = fn  # before its names: a function may call itself, or one that calls it back
        source = _getsource(fn)
        cells = inspect.getclosurevars(fn).nonlocals
        self._names(source, [cells, fn.__globals__], fn)
        self.definitions.append(source)
        return fn.__name__

    def cls(self, cls: type) -> str:
        if self._already_bound(cls.__name__, cls):
            return cls.__name__
        self.bound[cls.__name__] = cls
        source = _getsource(cls)
        self._names(source, [_class_globals(cls)], cls)
        self.definitions.append(source)
        return cls.__name__

    def _names(self, source: str, namespaces: list[Mapping[str, Any]], owner: Any) -> None:
        """Capture, before `owner`, every module name its source reads."""
        for name in _global_names(source):
            scope = next((ns for ns in namespaces if name in ns), None)
            if scope is None:
                continue  # a builtin, or a name the original could not find either
            value = scope[name]
            if name in self.bound and self.bound[name] is value:
                continue
            expression = self.value(value, namespaces, name)
            if expression != name:  # a literal, or an import under another name
                self._define(name, value, f"{name} = {expression}")

    def _construction(self, instance: Any) -> str:
        cls_name = self.cls(type(instance))
        state = getattr(instance, "__dict__", None)
        if state is None or hasattr(type(instance), "__slots__"):
            raise Uncapturable(f"a {cls_name} instance keeps its state in slots")
        namespaces = [_class_globals(type(instance))]
        values = {}
        for key, value in state.items():
            try:
                values[key] = self.value(value, namespaces)
            except Uncapturable:
                raise Uncapturable(f"its attribute {key!r} (type {type(value).__qualname__}) cannot be written "
                                   "as source") from None
        if _init_stores_arguments(type(instance), list(values)):
            return f"{cls_name}(" + ", ".join(f"{k}={v}" for k, v in values.items()) + ")"
        if not self._already_bound("_instance", _instance_helper):
            self._define("_instance", _instance_helper, _INSTANCE_HELPER)
        assigned = "{" + ", ".join(f"{k!r}: {v}" for k, v in values.items()) + "}"
        return f"_instance({cls_name}, {assigned})"

    def _lambda_source(self, fn: types.FunctionType) -> str:
        text = _getsource(fn)
        lambdas = [node for node in ast.walk(_parse_statement(text)) if isinstance(node, ast.Lambda)
                   and [a.arg for a in node.args.args] == list(fn.__code__.co_varnames[:fn.__code__.co_argcount])]
        if len(lambdas) != 1:
            raise Uncapturable("its lambda cannot be told apart on its line")
        expression = ast.unparse(lambdas[0])
        self._names(expression, [inspect.getclosurevars(fn).nonlocals, fn.__globals__], fn)
        return expression

    def _already_bound(self, name: str, value: Any) -> bool:
        """True when `name` already stands for `value`; a second, different value raises."""
        if name not in self.bound:
            return False
        if self.bound[name] is value:
            return True
        raise Uncapturable(f"two different values are both named {name!r}")

    def _define(self, name: str, value: Any, code: str) -> None:
        self._already_bound(name, value)
        self.bound[name] = value
        self.definitions.append(code)

    def _add_import(self, line: str) -> None:
        if line not in self.imports:
            self.imports.append(line)


def _literal_source(value: Any, depth: int = 0) -> str | None:
    """`value` as a Python literal expression, or None when it is not a simple literal."""
    if depth > 20:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if type(value) in _LITERAL_ATOMS:
        text = repr(value)
        return text if len(text) <= _MAX_LITERAL_CHARS else None
    if type(value) in (tuple, list, set, frozenset):
        sources = [_literal_source(v, depth + 1) for v in value]
        items = [i for i in sources if i is not None]
        if len(items) < len(sources):
            return None
        if type(value) in (set, frozenset):
            items = sorted(items)  # a set's order depends on the hash seed: keep the text stable
        inner = ", ".join(items)
        forms: dict[type, str] = {tuple: f"({inner}{',' if len(items) == 1 else ''})", list: f"[{inner}]",
                                  set: f"{{{inner}}}" if items else "set()",
                                  frozenset: f"frozenset({{{inner}}})" if items else "frozenset()"}
        text = forms[type(value)]
    elif type(value) is dict:
        pairs = [(_literal_source(k, depth + 1), _literal_source(v, depth + 1)) for k, v in value.items()]
        if any(k is None or v is None for k, v in pairs):
            return None
        text = "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"
    else:
        return None
    return text if len(text) <= _MAX_LITERAL_CHARS else None


def _global_names(source: str) -> list[str]:
    """The names `source` reads but does not bind itself, in first-use order (`symtable`'s view)."""
    try:
        top = symtable.symtable(source, "<backend>", "exec")
    except SyntaxError as exc:
        raise Uncapturable(f"its source does not parse on its own ({exc.msg})") from exc
    own = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    names: list[str] = []
    tables = [top]
    while tables:
        table = tables.pop(0)
        for symbol in table.get_symbols():
            if symbol.is_global() and symbol.is_referenced() and symbol.get_name() not in own | set(names):
                names.append(symbol.get_name())
        tables.extend(table.get_children())
    return names  # a builtin is in no module namespace, so `_names` passes over it


def _getsource(obj: Any) -> str:
    try:
        return textwrap.dedent(inspect.getsource(obj))
    except (OSError, TypeError) as exc:
        raise Uncapturable(f"no source for {getattr(obj, '__qualname__', obj)!s}") from exc


def _parse_statement(text: str) -> ast.AST:
    try:
        return ast.parse(text)
    except SyntaxError:
        try:
            return ast.parse("(\n" + text + "\n)")
        except SyntaxError as exc:
            raise Uncapturable("its lambda's line does not parse on its own") from exc


def _class_globals(cls: type) -> Mapping[str, Any]:
    for member in vars(cls).values():
        fn = getattr(member, "__func__", member)
        if inspect.isfunction(fn) and fn.__qualname__.startswith(cls.__qualname__ + "."):
            return fn.__globals__
    return getattr(sys.modules.get(cls.__module__), "__dict__", {})


def _init_stores_arguments(cls: type, keys: list[str]) -> bool:
    """`__init__(self, a, b)` whose body only does `self.a = a; self.b = b` (its docstring aside)."""
    init = vars(cls).get("__init__")
    if not inspect.isfunction(init):
        return False
    try:
        node = ast.parse(textwrap.dedent(inspect.getsource(init))).body[0]
    except (OSError, TypeError, SyntaxError, IndexError):
        return False
    params = [a.arg for a in node.args.args[1:] + node.args.kwonlyargs]  # type: ignore[attr-defined]
    if node.args.vararg or node.args.kwarg or sorted(params) != sorted(keys):  # type: ignore[attr-defined]
        return False
    body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]  # type: ignore[attr-defined]
    stored = {(s.targets[0].attr, s.value.id) for s in body if isinstance(s, ast.Assign) and len(s.targets) == 1
              and isinstance(s.targets[0], ast.Attribute) and isinstance(s.targets[0].value, ast.Name)
              and s.targets[0].value.id == "self" and isinstance(s.value, ast.Name)}
    return len(body) == len(keys) and stored == {(k, k) for k in keys}


def _script_import(namespaces: list[Mapping[str, Any]], alias: str, value: Any) -> str | None:
    """The script's own top-level import that binds `alias` to `value`, as one line, if it has one."""
    for ns in namespaces:
        path = ns.get("__file__")
        if not isinstance(path, str) or ns.get(alias) is not value:
            continue
        try:
            tree = ast.parse(Path(path).read_text())
        except (OSError, SyntaxError, ValueError):
            continue
        for node in tree.body:
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or (isinstance(node, ast.ImportFrom) and node.level):
                continue
            for item in node.names:
                bound = item.asname or (item.name if isinstance(node, ast.ImportFrom) else item.name.partition(".")[0])
                if bound == alias:
                    return ast.unparse(type(node)(**{**vars(node), "names": [item]}))
    return None


def _defined_in(value: Any, namespaces: list[Mapping[str, Any]]) -> bool:
    """A function or class defined in one of these module namespaces (so its source is ours to copy)."""
    if inspect.isfunction(value):
        return any(value.__globals__ is ns for ns in namespaces)
    if inspect.isclass(value):
        return any(_class_globals(value) is ns for ns in namespaces)
    return False


def _import_line(value: Any, name: str | None) -> str | None:
    """`from module import qualname [as name]` when that import gives back this very object."""
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if (not isinstance(module, str) or not isinstance(qualname, str) or not qualname.isidentifier()
            or module == "__main__"):
        return None
    if getattr(sys.modules.get(module), qualname, None) is not value:
        return None
    alias = name or qualname
    return f"from {module} import {qualname}" + (f" as {alias}" if alias != qualname else "")


def _instance_helper() -> None:
    """Stands for `_INSTANCE_HELPER` in `_SourceBuilder.bound`."""


_INSTANCE_HELPER = """def _instance(cls, state):
    # The backend object as it was when the run was recorded: its attributes, not its __init__.
    obj = cls.__new__(cls)
    obj.__dict__.update(state)
    return obj"""


def _namespaces(backend: Any, kwargs: dict[str, Any]) -> list[Mapping[str, Any]]:
    """The modules of the user's own compilers; a library's (`compile_fx_inner` as `fw_compiler`) is
    imported, so its module's names are not the user's to copy."""
    spaces = [v.__globals__ for v in kwargs.values() if inspect.isfunction(v) and _import_line(v, None) is None]
    main = getattr(sys.modules.get("__main__"), "__dict__", None)
    return spaces + ([main] if main is not None else [])


def _user_name(backend: Any) -> str:
    """What the user calls the backend: a function's name (what its source defines), else the
    script variable that holds it, else a name made from its class."""
    if inspect.isfunction(backend) and backend.__name__.isidentifier():
        return backend.__name__
    kwargs = torch_compat.aot_autograd_kwargs(backend)
    spaces: list[Mapping[str, Any]]
    if inspect.isfunction(backend):
        spaces = [backend.__globals__]
    elif kwargs is not None:
        spaces = _namespaces(backend, kwargs)
    else:
        spaces = [_class_globals(type(backend))]
    main = getattr(sys.modules.get("__main__"), "__dict__", None)
    for ns in spaces + ([main] if main is not None else []):
        for key, value in list(ns.items()):
            if value is backend and key.isidentifier() and not key.startswith("_"):
                return key
    if kwargs is not None or inspect.isfunction(backend):
        return "backend"
    words = re.sub(r"(?<!^)(?=[A-Z])", "_", type(backend).__name__).lower()
    return words if words.isidentifier() else "backend"

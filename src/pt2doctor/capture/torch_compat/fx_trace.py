"""Rebuild a recorded graph from its code with every op in it, for the minifier's loader and for repros.

Contract: `graph_module(module, ops)` traces `module` (whose `forward` is the code FX wrote for a
recorded graph) into a `torch.fx.GraphModule` in which every call of an op named in `ops` is a node,
whatever its operands. `torch.fx.symbolic_trace` cannot promise that: it runs an op none of whose
operands is traced (a factory such as `aten.arange`, `aten.bartlett_window`, `aten.eye`) and keeps the
result as a constant, so a lowering bug in that op vanished from the repro; a higher-order op checks its
operands eagerly (cond: `validate_subgraph_args_types`) and rejects a Proxy. While tracing, each named op
is looked up from its `torch.ops` namespace as a function that records a call_function node of the op
itself; the namespace's cached attributes (`_OpNamespace.__getattr__` caches with setattr, torch 2.11,
2.13) are put back afterwards. `graph_module_source()` is the same function's text, which every repro
embeds (a repro needs plain torch only), so the loader and the repro build the same graph.
An item assignment to a traced value (`dense_mask[idx] = ones`, which Dynamo writes for flex_attention's block
mask) is recorded as an `operator.setitem` node (FX's Proxy has no `__setitem__`; put back afterwards).
`opaque_calls(code)` names the other functions the code calls that tracing cannot see: a torch function
outside `__torch_function__` (functorch's `predispatch._make_dual`, `torch._C._set_fwd_grad_enabled`:
the scaffolding Dynamo writes around `torch.func.jvp`) would run while tracing, reject a Proxy or mutate
the tracing process's state, and vanish from the graph. `graph_module` records a call of each as a node
too, patched where it lives (`torch._C._set_fwd_grad_enabled`) and put back afterwards.
The other way, `fx_module_source(gm)` writes a graph module as code (import block and `forward`), as the recorder
keeps every graph it records; a global no module holds (Dynamo's NumPy wrappers) is rebuilt from what it wraps.
"""

from __future__ import annotations

import functools
import inspect
import re
from typing import Any

_CALL = re.compile(r"\btorch\.ops\.(\w+)\.(\w+)(?:\.(\w+))?\s*\(")
_DOTTED_CALL = re.compile(r"(?<![\w.])(torch(?:\.\w+)+)\s*\(")


def torch_ops_called(code: str) -> tuple[str, ...]:
    """`aten.arange.start`, `higher_order.cond`: every op `code` calls through `torch.ops`, in order."""
    return tuple(dict.fromkeys(".".join(p for p in m.groups() if p) for m in _CALL.finditer(code)))


def opaque_calls(code: str) -> tuple[str, ...]:
    """`torch._functorch.predispatch._make_dual`: every torch function `code` calls by its dotted name that
    is neither an op (`torch.ops`) nor overridable by `__torch_function__` (what tracing sees), in order."""
    import torch

    overridable = _overridable()
    found = []
    for name in dict.fromkeys(_DOTTED_CALL.findall(code)):
        try:
            target = _resolve(torch, name)
        except AttributeError:
            continue
        if not name.startswith("torch.ops.") and callable(target) and not isinstance(target, type) \
                and target not in overridable:
            found.append(name)
    return tuple(found)


@functools.cache
def _overridable() -> frozenset[Any]:
    import torch.overrides

    return frozenset(f for functions in torch.overrides.get_overridable_functions().values() for f in functions)


def _resolve(torch: Any, dotted: str) -> Any:
    value = torch
    for part in dotted.split(".")[1:]:
        value = getattr(value, part)
    return value


def graph_module(module: Any, ops: tuple[str, ...]) -> Any:
    """`module` as a GraphModule in which every call of an op in `ops` (`aten.eye.default`,
    `higher_order.cond`) or of a torch function named in it (`torch._C._set_fwd_grad_enabled`) is a
    node, whatever its operands; submodules (higher-order branches) first."""
    import torch
    import torch.fx

    for name, child in list(module.named_children()):
        if not isinstance(child, torch.fx.GraphModule):
            setattr(module, name, graph_module(child, ops))
    tracer = torch.fx.Tracer()

    def record(target: Any) -> Any:
        return lambda *args, **kwargs: tracer.create_proxy("call_function", target, args, kwargs)

    class Packet:
        """An op packet whose named overloads record nodes; the rest of it is the real packet's."""

        def __init__(self, packet: Any, overloads: set[str]) -> None:
            self.packet, self.overloads = packet, overloads

        def __getattr__(self, name: str) -> Any:
            target = getattr(self.packet, name)
            return record(target) if name in self.overloads else target

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return tracer.create_proxy("call_function", self.packet, args, kwargs)

    overloads: dict[tuple[str, str], set[str]] = {}
    patched = []
    for qualified in ops:
        if qualified.startswith("torch."):  # a function: recorded where the code looks it up
            owner_name, _, attribute = qualified.rpartition(".")
            owner = torch
            for part in owner_name.split(".")[1:]:
                owner = getattr(owner, part)
            patched.append((owner, attribute, owner.__dict__.get(attribute)))
            setattr(owner, attribute, record(getattr(owner, attribute)))
            continue
        namespace_name, op, *overload = qualified.split(".")
        overloads.setdefault((namespace_name, op), set()).update(overload)
    for (namespace_name, op), names in overloads.items():
        namespace = getattr(torch.ops, namespace_name)
        real = getattr(namespace, op)
        patched.append((namespace, op, namespace.__dict__.get(op)))
        setattr(namespace, op, Packet(real, names) if names else record(real))
    # `x[i] = v` on a traced value: Dynamo writes it so (flex_attention's block mask), a Proxy has no __setitem__
    import operator

    patched.append((torch.fx.Proxy, "__setitem__", torch.fx.Proxy.__dict__.get("__setitem__")))
    torch.fx.Proxy.__setitem__ = lambda self, key, value: record(operator.setitem)(self, key, value)  # type: ignore[assignment, method-assign]
    try:
        graph = tracer.trace(module)
    finally:
        for namespace, op, cached in reversed(patched):
            if cached is None:
                delattr(namespace, op)
            else:
                setattr(namespace, op, cached)
    return torch.fx.GraphModule(module, graph)


def graph_module_source() -> str:
    """`graph_module` as text, for a repro to define it exactly as the loader runs it."""
    return "from typing import Any\n\n\n" + inspect.getsource(graph_module)


def fx_module_source(gm: Any) -> str:
    """Import block plus `forward` code of an FX graph module, as torch's own pickling writes it
    (`torch.fx.graph_module._format_import_statement`, 2.13), except for the globals torch's importer
    cannot name: Dynamo's NumPy wrappers (`wrapped_cumsum`: an instance no module holds) are rebuilt
    from what they wrap; anything else becomes a name that raises when the graph calls it, so the graph
    is still recorded (torch's own minifier raises `ObjNotFoundError` there, inside the user's compile)."""
    from torch.fx.graph_module import _format_import_statement
    from torch.package import sys_importer

    python = gm.graph.python_code(root_module="self")
    imports, bindings = set(), []
    for name, obj in python.globals.items():
        try:
            imports.add(_format_import_statement(name, obj, sys_importer))
        except Exception:
            needs, binding = _rebuilt_global(name, obj)
            imports.update(needs)
            bindings.append(binding)
    return "\n".join([*sorted(imports), *bindings]) + "\n" + python.src


def _rebuilt_global(name: str, obj: Any) -> tuple[list[str], str]:
    """(import lines, the line binding `name`) for a global no module holds: Dynamo's
    `numpy_to_tensor_wrapper`, `numpy_method_wrapper` and `numpy_operator_wrapper` (torch._dynamo.utils,
    2.13) rebuilt around the `torch._numpy` function, method name or `operator` function they wrap;
    anything else a function that raises, saying what it stands for."""
    import operator

    from torch._dynamo import utils

    inner = {utils.numpy_to_tensor_wrapper: "f", utils.numpy_method_wrapper: "method",
             utils.numpy_operator_wrapper: "op"}.get(type(obj))
    wrapped = getattr(obj, inner, None) if inner else None
    wrapped_name = getattr(wrapped, "__name__", "")
    if isinstance(wrapped, str):
        argument: str | None = repr(wrapped)
    elif wrapped is not None and getattr(operator, wrapped_name, None) is wrapped:
        argument = f"operator.{wrapped_name}"
    else:
        argument = _torch_numpy_path(wrapped)
    if argument is None:
        return [], f"def {name}(*args, **kwargs): raise NotImplementedError({f'{obj!r}: named by no module'!r})"
    wrapper = type(obj).__name__
    return (["import operator", "import torch._numpy", f"from torch._dynamo.utils import {wrapper}"],
            f"{name} = {wrapper}({argument})")


def _torch_numpy_path(function: Any) -> str | None:
    """`torch._numpy.cumsum`, `torch._numpy.linalg.norm`: where the torch._numpy namespace holds `function`
    (its `__module__` is the implementation's, which holds the undecorated one)."""
    import torch._numpy as tnp

    name = getattr(function, "__name__", "")
    for path, module in (("torch._numpy", tnp), ("torch._numpy.linalg", tnp.linalg),
                         ("torch._numpy.fft", tnp.fft), ("torch._numpy.random", tnp.random)):
        if getattr(module, name, None) is function:
            return f"{path}.{name}"
    return None

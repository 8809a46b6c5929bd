"""Where the installed torch handles what a diagnosis found: private registries read for file and line.

Contract: `op_sources(name)` gives, for an aten op name (`aten.relu.default`; `aten.relu` means its `default`
overload, else its first) or a higher-order op's (`higher_order.flex_attention_backward`: also where its class is
defined), the Inductor lowering registered for it (`torch._inductor.lowering.lowerings`; unless `lowerings` is off), the
decomposition Inductor applies (`torch._inductor.decomposition.decompositions`; else, said so, the core
`torch._decomp.decomposition_table`'s) and a Python meta kernel (`torch._decomp.meta_table`), those it
has; a name that is no op (`torch.relu`, `list.append`) gives nothing. `subsystem_sources(backend,
subsystem, debug_info, ops)` gives the home of a `CompilerBisector` result: the lowering of the
isolated node's op, the decomposition of the isolated op, the function (or, failing that, the
`GraphTransformObserver` call) of an FX pass, the config field a config change sets; nothing where it
cannot be found. `config_ref(module, key, what)` is where a config module defines a key (nested ones too),
`config_value(module, key)` the installed torch's value of it (`MISSING` where it has none). Files are
relative to the directory holding the torch package (`torch/_inductor/lowering.py`, as PyTorch's repository
has them); a function defined outside torch is skipped. Never raises for a name it cannot resolve. Checked
on torch 2.13.0 (CPU).
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

from pt2doctor.model.source_refs import SourceRef

# `CompilerBisector`'s config changes: the backend's name -> the config module its fields live in
_CONFIG_MODULES = {"inductor": "torch._inductor.config", "aot_eager_decomp_partition": "torch._functorch.config"}
_PASS_SUBSYSTEMS = ("pre_grad_passes", "joint_graph_passes", "post_grad_passes")


def _torch_root() -> Path:
    import torch

    return Path(torch.__file__).resolve().parent.parent


def _overload(name: str) -> Any | None:
    """The `OpOverload` named `ns.op[.overload]` under `torch.ops` (a higher-order op, `higher_order.op`, itself), or
    None."""
    import torch

    parts = name.split(".")
    if parts[0] == "higher_order" and len(parts) == 2:
        hop = getattr(torch.ops.higher_order, parts[1], None)
        return hop if isinstance(hop, torch._ops.HigherOrderOperator) else None
    if len(parts) not in (2, 3) or not all(parts):
        return None
    try:
        packet = getattr(getattr(torch.ops, parts[0]), parts[1])
        overloads = packet.overloads()
        # `aten.searchsorted` has no `default`: its first overload (`Tensor`) stands for it
        name = parts[2] if len(parts) == 3 else "default" if "default" in overloads or not overloads else overloads[0]
        op = getattr(packet, name)
    except (AttributeError, RuntimeError, ImportError):  # `torch.relu`: torch.ops has no namespace `torch` op
        return None
    return op if isinstance(op, torch._ops.OpOverload) else None


def torch_relative(file: str | None) -> str | None:
    if not file:
        return None
    try:
        return Path(file).resolve().relative_to(_torch_root()).as_posix()
    except ValueError:  # defined outside torch (a user's registration): not PyTorch's source
        return None


def function_ref(what: str, fn: Any, registered: str | None = None) -> SourceRef | None:
    """`fn`'s definition; for a function a factory made (`make_pointwise.<locals>.inner`, shared by
    many ops), the line in the same file that registers `registered` (`relu = register_pointwise(aten.relu)`)
    when there is one, since the shared body says nothing about this op."""
    fn = inspect.unwrap(getattr(fn, "func", fn))  # functools.partial, then functools.wraps
    try:
        file = inspect.getsourcefile(fn)
        line = inspect.getsourcelines(fn)[1]
    except (TypeError, OSError):
        return None
    relative = torch_relative(file)
    if relative is None or file is None:
        return None
    name = getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))
    if "<locals>" in name and registered:
        line = _registration_line(Path(file), registered) or line
    return SourceRef(what, relative, line, name)


def _registration_line(file: Path, op: str) -> int | None:
    pattern = re.compile(rf"\b{re.escape(op)}\b")
    for number, text in enumerate(_lines(file), 1):
        if "register" in text and pattern.search(text):
            return number
    return None


def _lines(file: Path) -> list[str]:
    try:
        return file.read_text().splitlines()
    except OSError:
        return []


def op_sources(name: str, lowerings: bool = True) -> list[SourceRef]:
    op = _overload(name)
    if op is None:
        return []
    import torch
    import torch._decomp as core
    from torch._inductor import decomposition, lowering

    packet = ".".join(name.split(".")[:2])
    inductors = decomposition.decompositions.get(op)
    found = [
        ("Inductor lowering of", lowering.lowerings.get(op) if lowerings else None),
        ("Inductor's decomposition of", inductors),
        ("decomposition (torch._decomp; not in Inductor's table) of",
         core.decomposition_table.get(op) if inductors is None else None),
        ("meta kernel of", core.meta_table.get(op)),
    ]
    if isinstance(op, torch._ops.HigherOrderOperator):  # where the op itself is defined: its dense and fake kernels
        found.append(("higher-order op", type(op)))
    refs = [function_ref(f"{what} {op}", fn, packet) for what, fn in found if fn is not None]
    return [r for r in refs if r is not None]


def aoti_input_checks_ref() -> SourceRef | None:
    """Where Inductor's C++ wrapper generates an AOTInductor package's checks of its inputs' sizes, strides and dtypes
    (2.13: `CppWrapperCpu.generate_input_output_runtime_checks`, run by the package only where AOTI_RUNTIME_CHECK_INPUTS
    is set); None where the installed torch has no such method."""
    try:
        from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
    except ImportError:
        return None
    checks = getattr(CppWrapperCpu, "generate_input_output_runtime_checks", None)
    what = "AOTInductor's checks of a package's inputs, compiled in and run only where AOTI_RUNTIME_CHECK_INPUTS=1"
    return function_ref(what, checks) if checks is not None else None


def subsystem_sources(backend: str | None, subsystem: str | None, debug_info: str | None,
                      ops: tuple[str, ...]) -> list[SourceRef]:
    if not backend or not subsystem:
        return []
    info = (debug_info or "").strip()
    if subsystem == "lowerings":  # debug info: the FX node (`relu`, `relu_1`), named after its op
        base = re.sub(r"_\d+$", "", info)
        named = [o for o in ops if o.split(".")[1:2] == [base]] or [f"aten.{base}.default"]
        return [_bisected(r) for r in op_sources(named[0]) if r.what.startswith("Inductor lowering")][:1]
    if subsystem == "decomposition":  # debug info: the op (`aten.silu.default`)
        return [_bisected(r) for r in op_sources(info) if "decomposition" in r.what][:1]
    if subsystem in _PASS_SUBSYSTEMS and info:
        ref = _pass_ref(subsystem, info)
        return [ref] if ref else []
    if "=" in info and backend in _CONFIG_MODULES:  # a config change: `fallback_random=True`
        ref = _config_ref(_CONFIG_MODULES[backend], info.split("=", 1)[0].strip(), subsystem)
        return [ref] if ref else []
    return []


def _bisected(ref: SourceRef) -> SourceRef:
    return SourceRef(f"CompilerBisector isolates the {ref.what}", ref.file, ref.line, ref.function)


def _pass_ref(subsystem: str, name: str) -> SourceRef | None:
    """The pass's function in `torch/_inductor/fx_passes/`, else the line that applies it under its name."""
    from torch._inductor import fx_passes

    files = sorted(Path(fx_passes.__file__).parent.glob("*.py"))
    defined = re.compile(rf"^\s*def {re.escape(name)}\(")
    quoted = re.compile(rf"[\"']{re.escape(name)}[\"']")
    for pattern, what in ((defined, "the pass"), (quoted, "where it applies the pass")):
        for file in files:
            lines = _lines(file)
            number = next((n for n, text in enumerate(lines, 1) if pattern.search(text)), None)
            relative = torch_relative(str(file))
            if number is not None and relative is not None:
                function = name if pattern is defined else _enclosing_function(lines, number)
                return SourceRef(f"CompilerBisector ({subsystem}) isolates {what} {name}", relative, number, function)
    return None


def _enclosing_function(lines: list[str], number: int) -> str:
    for text in reversed(lines[:number]):
        match = re.match(r"\s*(?:async\s+)?def (\w+)", text)
        if match:
            return match.group(1)
    return "<module>"


def _config_ref(module: str, field: str, subsystem: str) -> SourceRef | None:
    return config_ref(module, field, f"CompilerBisector ({subsystem}): the config field {field}")


def config_ref(module: str, key: str, what: str) -> SourceRef | None:
    """Where the config module `module` defines `key` (`split_reductions`; a nested `triton.persistent_reductions`
    inside its `class triton:`)."""
    import importlib

    try:
        file = inspect.getsourcefile(importlib.import_module(module))
    except (ImportError, TypeError):
        return None
    relative = torch_relative(file)
    *classes, field = key.split(".")
    lines, start, indent = _lines(Path(file or "")), 0, ""
    for name in classes:  # into each enclosing class, its body one level deeper
        start = next((n for n in range(start, len(lines)) if re.match(rf"^{indent}class {re.escape(name)}\b",
                                                                        lines[n])), len(lines))
        indent += "    "
    pattern = re.compile(rf"^{indent}{re.escape(field)}\s*[:=]")
    number = next((n + 1 for n in range(start, len(lines)) if pattern.match(lines[n])), None)
    if relative is None or number is None:
        return None
    return SourceRef(what, relative, number, f"{module}.{key}")


def config_value(module: str, key: str) -> object:
    """The installed torch's value of `module`'s `key` (dotted for a nested one), `MISSING` where it has none."""
    import importlib

    try:
        value: object = importlib.import_module(module)
        for part in key.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError):
        return MISSING
    return value


MISSING = object()


def _split_setting(name: str) -> tuple[str, str]:
    """`torch._inductor.config.triton.x` -> (`torch._inductor.config`, `triton.x`): the module ends at `.config`."""
    head, _, key = name.partition(".config.")
    return f"{head}.config", key


def where_to_look(ops: tuple[str, ...], backend: str | None, subsystem: str | None,
                  debug_info: str | None, settings: tuple[str, ...] = (), lowerings: bool = True) -> list[SourceRef]:
    """Every op's places (`lowerings`: its Inductor lowering among them), then the bisection's, then the settings'
    (`torch._inductor.config.split_reductions`, as the settings search found them to remove the failure), without
    repeats (a lowering named twice is listed once)."""
    refs = [r for op in ops for r in op_sources(op, lowerings)] + subsystem_sources(backend, subsystem, debug_info, ops)
    for name in settings:
        module, key = _split_setting(name)
        ref = config_ref(module, key, f"the compiler setting {key}, whose change removes the failure")
        refs += [ref] if ref else []
    out: dict[tuple[str, int], SourceRef] = {}
    for ref in refs:
        first = out.setdefault((ref.file, ref.line), ref)
        if first is not ref and ref.what.startswith("CompilerBisector") and "CompilerBisector" not in first.what:
            out[(ref.file, ref.line)] = SourceRef(f"{first.what} (CompilerBisector isolates it)", first.file,
                                                  first.line, first.function)
    return list(out.values())

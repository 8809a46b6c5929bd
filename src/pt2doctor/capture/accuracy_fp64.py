"""The fp64 side of the accuracy probe: a graph made to compute in fp64, and which values are fp64.

Contract: `fp64_module(gm)` is a copy of an FX graph module that computes in float64 (parameters,
buffers, tensor constants and the float dtypes the graph names; a bitcast left alone), as torch's
`cast_dtype_args_to_fp64` does for after-AOT graphs; `missing_reference(eager, fp64)` says why some
floating output has no fp64 value. Pure functions of the graph and values; `capture.accuracy_probe`
runs them.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any


def fp64_module(gm: Any) -> Any:
    """A copy of `gm` computing in fp64: its floating parameters, buffers and tensor constants cast, and
    every float dtype the graph names (`.to(torch.float32)`, `.type(...)`, `dtype=` of a factory,
    `.float()`) made fp64, as `torch._dynamo.debug_utils.cast_dtype_args_to_fp64` does for after-AOT
    graphs (2.13; it reaches `dtype=` keywords only). A bitcast `.view(dtype)` is left alone."""
    import torch
    from torch.fx.node import map_aggregate

    module = copy.deepcopy(gm).to(torch.float64)  # parameters and buffers
    for node in module.graph.nodes:
        if node.op == "get_attr":  # a tensor constant Dynamo stored as a plain attribute
            owner, _, name = str(node.target).rpartition(".")
            holder = module.get_submodule(owner)
            if is_float(getattr(holder, name, None)):
                setattr(holder, name, getattr(holder, name).to(torch.float64))
        elif node.op in ("call_function", "call_method") and not _bitcast(node):
            node.target = "double" if node.op == "call_method" and node.target in _CASTS else node.target
            node.args, node.kwargs = map_aggregate((node.args, node.kwargs), _fp64_dtype)
    module.recompile()
    return module


_CASTS = ("float", "half", "bfloat16")


def _fp64_dtype(value: Any) -> Any:
    import torch

    return torch.float64 if isinstance(value, torch.dtype) and value.is_floating_point else value


def to_fp64(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.detach().to(torch.float64).requires_grad_(value.requires_grad)
    return value


def _bitcast(node: Any) -> bool:
    """`x.view(dtype)` reinterprets bits: its dtype must stay."""
    target = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    return target == "view"


def missing_reference(eager: Sequence[Any], fp64: Sequence[Any] | None) -> str | None:
    """Why some floating output has no fp64 value although the fp64 run ran, or None."""
    for index, (e, r) in enumerate(zip(eager, fp64 or ())):
        if is_float(e) and not is_fp64(r):
            return f"output {index} stays {str(getattr(r, 'dtype', None)).removeprefix('torch.')} in the fp64 run"
    return None


def is_float(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor) and value.is_floating_point()


def is_fp64(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor) and value.dtype == torch.float64

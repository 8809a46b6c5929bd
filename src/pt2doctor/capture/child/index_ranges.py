"""The index values of a graph's indexing nodes against the sizes they index (`capture.child.kernel_check`).

Contract: `index_ranges(nodes, value_of)` returns one `IndexRange` per index tensor of each indexing node
among `nodes` (`aten.index`, `index_select`, `gather`, `embedding`, `index_put`, `scatter*`) whose values
`value_of(node)` knows (a real tensor: an eager value, or a graph input), with the size of the dimension it
indexes (from the indexed tensor's value, else its fake value's static size). What it cannot know is left out.
An out-of-range index is what makes a compiled kernel read or write outside its buffer: eager checks it
and raises, Inductor's kernels assert it on CUDA only when asked (a device-side assert) and not at all
on CPU.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from pt2doctor.capture import torch_compat
from pt2doctor.model.runtime import IndexRange

# op name -> (argument holding the indexed tensor, how to find (index argument, dim) pairs)
_DIM_INDEX = {"index_select": (1, 2), "gather": (1, 2), "scatter": (1, 2), "scatter_add": (1, 2),
              "scatter_reduce": (1, 2)}


def index_ranges(nodes: Iterable[Any], value_of: Callable[[Any], Any]) -> tuple[IndexRange, ...]:
    found: list[IndexRange] = []
    for node in nodes:
        if node.op != "call_function":
            continue
        name = torch_compat.qualified_name(node.target)
        packet = name.split(".")[1] if name.startswith("aten.") and "." in name else ""
        for index, size in _pairs(node, packet.rstrip("_")):
            values = value_of(index)
            if size is None or not _is_integer_tensor(values) or values.numel() == 0:
                continue
            found.append(IndexRange(node.name, name, int(values.min()), int(values.max()), size))
    return tuple(found)


def _pairs(node: Any, packet: str) -> list[tuple[Any, int | None]]:
    """(index argument node, size of the dimension it indexes) for an indexing node."""
    args = node.args
    if packet in ("index", "index_put") and len(args) > 1:
        return [(i, _size(args[0], dim)) for dim, i in enumerate(args[1]) if i is not None]
    if packet == "embedding" and len(args) > 1:
        return [(args[1], _size(args[0], 0))]
    if packet in _DIM_INDEX and len(args) > 2 and isinstance(args[1], int):
        return [(args[2], _size(args[0], args[1]))]
    return []


def _size(tensor_node: Any, dim: int) -> int | None:
    value = getattr(tensor_node, "meta", {}).get("val")
    shape = getattr(value, "shape", None)
    if shape is None or not -len(shape) <= dim < len(shape):
        return None
    try:
        return int(shape[dim])
    except (TypeError, ValueError):  # a symbolic size without a hint
        return None


def _is_integer_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor) and not value.is_floating_point() and not value.is_complex() and (
        value.dtype is not torch.bool)

"""A recorded graph's inputs: their metadata (`input_specs`) and the values worth keeping (`save_values`).

Contract: `input_specs(gm, example_inputs)` gives one `TensorSpec`/`ScalarSpec` per input, dims that
are SymInts in the graph's placeholders marked dynamic, an integer tensor's recorded min and max
(`bounds`), its storage offset, whether it is a leaf (autograd) and whether it is a ZeroTensor, and
which inputs are views of one storage (`storage`: the first such input's index);
`save_values(inputs, path, budget)` saves the tensor inputs that have values (`has_values`; only indices and masks, `is_index`, when asked),
within a byte budget, and never raises. `has_values`/`is_index` are the one test of what can be
saved and what matters, here and in `reduce.saved_values`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from pt2doctor.capture import torch_compat
from pt2doctor.model.minify import InputSpec, ScalarSpec, TensorSpec


def is_index(value: Any) -> bool:
    """An integer or bool tensor (indices, masks): its values matter, and random stand-ins (zeros) hide bugs."""
    return not (value.is_floating_point() or value.is_complex())


def has_values(value: Any) -> bool:
    """A plain dense tensor with data: not a subclass (fake tensors are one; `torch.load(weights_only=True)`
    reads none back), sparse, on `meta` or a ZeroTensor (no storage; `TensorSpec.zero` rebuilds it).
    The one test of what can be saved, here and in `reduce.saved_values`."""
    import torch

    return (type(value) in (torch.Tensor, torch.nn.Parameter) and value.layout == torch.strided and not value.is_meta
            and not torch_compat.is_zero_tensor(value))


def save_values(inputs: Sequence[Any], path: Path, budget: int, *, indices_only: bool = False) -> str | None:
    """Save the tensor inputs that have values (with `indices_only`, the integer/bool ones), in
    input order while they fit in `budget` bytes, to `path`; its name, or None when none was saved.
    Never raises: values that cannot be read (a CUDA context a kernel's error has poisoned) are
    simply not kept, and the failure is recorded without them. The file appears whole or not at all
    (written beside it, then renamed), and a save that fails removes nothing but its own part."""
    import torch

    values = {}
    partial = path.with_name(path.name + ".part")
    try:
        for index, value in enumerate(inputs):
            if has_values(value) and (is_index(value) or not indices_only) and value.nbytes <= budget:
                values[index] = value.detach().cpu().clone()
                budget -= value.nbytes
        if not values:
            return None
        torch.save(values, partial)
        os.replace(partial, path)
    except Exception:
        partial.unlink(missing_ok=True)
        return None
    return path.name


def input_specs(gm: Any, example_inputs: Any) -> list[InputSpec]:
    """Metadata of the example inputs; dims that are SymInts in the placeholders stay dynamic."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    metas = [p.meta.get("example_value", p.meta.get("val")) for p in placeholders]
    specs = [_spec(value, meta) for value, meta in zip(example_inputs, metas + [None] * len(example_inputs))]
    for index, group in _storage_groups(example_inputs).items():
        specs[index] = msgspec.structs.replace(specs[index], storage=group)
    return specs


def _storage_groups(values: Sequence[Any]) -> dict[int, int]:
    """Input index -> the index of the first input whose storage it shares (itself for that one), for the
    tensors with values that share one with another of the same dtype: views of one tensor."""
    import torch

    by_storage: dict[tuple[str, int, Any], list[int]] = {}
    for index, value in enumerate(values):
        if isinstance(value, torch.Tensor) and has_values(value) and value.numel():
            key = (str(value.device), value.untyped_storage().data_ptr(), value.dtype)
            by_storage.setdefault(key, []).append(index)
    return {index: members[0] for members in by_storage.values() if len(members) > 1 for index in members}


def _spec(value: Any, meta: Any) -> InputSpec:
    import torch

    if isinstance(value, torch.Tensor):
        sizes = meta.shape if isinstance(meta, torch.Tensor) else value.shape
        return TensorSpec(
            tuple(torch_compat.symint_hint(s) for s in value.shape),
            tuple(torch_compat.symint_hint(s) for s in value.stride()),
            str(value.dtype).removeprefix("torch."), str(value.device), bool(value.requires_grad),
            tuple(d for d, s in enumerate(list(sizes) + list(value.shape)[len(sizes):]) if isinstance(s, torch.SymInt)),
            bounds=_bounds(value), offset=int(value.storage_offset()) if has_values(value) else 0,
            leaf=bool(value.is_leaf), zero=torch_compat.is_zero_tensor(value),
        )
    if isinstance(value, torch.SymInt):
        return ScalarSpec(torch_compat.symint_hint(value), dynamic=True)
    return ScalarSpec(value if isinstance(value, (int, float, bool)) else None)


def _bounds(value: Any) -> tuple[int, int] | None:
    """An integer tensor's min and max (a repro draws its random stand-in there, so indices stay in
    bounds where the values were not saved); None for other tensors and for ones without values."""
    import torch

    if not has_values(value) or value.dtype == torch.bool or not is_index(value) or value.numel() == 0:
        return None
    with torch.no_grad():
        return int(value.min()), int(value.max())

"""A recorded graph's inputs: their metadata (`input_specs`); their values are saved by `capture.input_values`.

Contract: `input_specs(gm, example_inputs)` gives one `TensorSpec`/`ScalarSpec` per input, dims that
are SymInts in the graph's placeholders marked dynamic, an integer tensor's recorded min and max
(`bounds`), its storage offset, whether it is a leaf (autograd) and whether it is a ZeroTensor, and
which inputs are views of one storage (`storage`: the first such input's index);
`has_values`/`is_index` (`capture.input_values`) are the one test of what can be saved and what matters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from pt2doctor.capture import torch_compat
from pt2doctor.capture.input_values import has_values, is_index
from pt2doctor.model.minify import InputSpec, ScalarSpec, TensorSpec


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

"""Saved input values: the one format, written by the recorder in the user's process and by the minifier.

Contract: a values file is `torch.save` of a dict of CPU tensors by entry name: `arg<i>` for input `i`
(`entry(i)`), and, beside them where the minifier writes a repro's inputs, `storage<g>` (the storage views
of one tensor share) and `node:<name>` (a node's eager value); tensors only, so
`torch.load(weights_only=True)` reads it back (memory-mapped where it is large). `save_values(inputs,
path, budget=..., indices_only=..., extra=...)` saves the tensor inputs that have values (`has_values`;
only indices and masks, `is_index`, when asked), in input order while they fit in `budget` bytes, with
`extra` entries beside them, and returns `{input index: entry}` ({} and no file when there was nothing to save).
It never raises: values that cannot be read (a CUDA context a kernel's error has poisoned) are simply not
kept. `write_values(values, path)` replaces a file whole (written beside it, then renamed: a process
that has it memory-mapped keeps the old one, and a save that fails removes nothing but its own part).
`load_values(path)` reads the inputs back by index. Both ways into the minifier go through here: the
recorder (`capture.child.graph_recorder`, values kept in the run) and the minifier
(`reduce.saved_values.save_repro_inputs`, the file beside a repro).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pt2doctor.capture import torch_compat

_ARG = "arg"


def entry(index: int) -> str:
    return f"{_ARG}{index}"


def is_index(value: Any) -> bool:
    """An integer or bool tensor (indices, masks): its values matter, and random stand-ins (zeros) hide bugs."""
    return not (value.is_floating_point() or value.is_complex())


def has_values(value: Any) -> bool:
    """A plain dense tensor with data: not a subclass (fake tensors are one; `torch.load(weights_only=True)`
    reads none back), sparse, on `meta` or a ZeroTensor (no storage; `TensorSpec.zero` rebuilds it).
    The one test of what can be saved."""
    import torch

    return (type(value) in (torch.Tensor, torch.nn.Parameter) and value.layout == torch.strided and not value.is_meta
            and not torch_compat.is_zero_tensor(value))


def save_values(inputs: Sequence[Any], path: Path, *, budget: int | None = None, indices_only: bool = False,
                extra: Mapping[str, Any] | None = None) -> dict[int, str]:
    values: dict[str, Any] = {}
    try:
        for index, value in enumerate(inputs):
            fits = budget is None or (has_values(value) and value.nbytes <= budget)
            if has_values(value) and (is_index(value) or not indices_only) and fits:
                values[entry(index)] = value.detach().cpu().clone()
                budget = None if budget is None else budget - value.nbytes
        if not values and not extra:
            return {}
        write_values({**values, **(extra or {})}, path)
    except Exception:
        return {}
    return {int(name.removeprefix(_ARG)): name for name in values}


def write_values(values: Mapping[str, Any], path: Path) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".part")
    try:
        torch.save(dict(values), partial)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def load_values(path: Path) -> dict[int, Any]:
    """The saved inputs by input index (`arg<i>` entries; a repro's other entries are left out)."""
    import torch

    saved = torch.load(path, weights_only=True)
    return {int(name.removeprefix(_ARG)): value for name, value in saved.items()
            if name.startswith(_ARG) and name.removeprefix(_ARG).isdigit()}

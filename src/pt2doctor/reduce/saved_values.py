"""Saved input values: the real tensors a repro reads from `repro_inputs.pt` instead of random ones.

Contract: `values_matter(inputs, accuracy)` says when real values are worth saving: a wrong-result
check, or integer/bool tensors (indices, masks), whose random stand-ins (zeros) would hide the bug.
`save_values(inputs, specs, out)` writes the real tensors among `inputs` (fakes and non-tensors are
skipped, so a list with holes is fine) to `out/repro_inputs.pt` as CPU copies (`torch.save` of a
dict) and returns `specs` with `saved` naming each one's entry (`arg<index>`); `reduce.repro`
renders those inputs as `saved_input(name, ...)`, which reads the file with
`torch.load(weights_only=True)`. Both ways into the minifier save through here, so the file has
one format: the API (`reduce.api`, values the caller passed) and a recorded run (`reduce.fx_load`,
values `capture.child.graph_recorder` kept).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import torch

from pt2doctor.capture.child.graph_inputs import has_values, is_index
from pt2doctor.model.minify import InputSpec, TensorSpec

FILE_NAME = "repro_inputs.pt"


def values_matter(inputs: Sequence[Any], accuracy: bool) -> bool:
    """Real values matter for a wrong-result failure, and in integer tensors (indices, masks)."""
    real = [v for v in inputs if has_values(v)]
    return bool(real) and (accuracy or any(is_index(v) for v in real))


def save_values(inputs: Sequence[Any], specs: Sequence[InputSpec], out: Path) -> list[InputSpec]:
    """Write the real tensor inputs to `out/repro_inputs.pt`; their specs name their entries."""
    values, named = {}, list(specs)
    for index, (value, spec) in enumerate(zip(inputs, specs)):
        if has_values(value) and isinstance(spec, TensorSpec):
            values[f"arg{index}"] = value.detach().cpu().clone()
            named[index] = msgspec.structs.replace(spec, saved=f"arg{index}")
    out.mkdir(parents=True, exist_ok=True)
    torch.save(values, out / FILE_NAME)
    return named

"""Saved input values: the real tensors a repro reads from `repro_inputs.pt` instead of random ones.

Contract: `values_matter(inputs, accuracy)` says when real values are worth saving: a wrong-result
check, or integer/bool tensors (indices, masks), whose random stand-ins (zeros) would hide the bug.
`save_repro_inputs(inputs, specs, out)` writes the real tensors among `inputs` (fakes and non-tensors are
skipped, so a list with holes is fine) to `out/repro_inputs.pt` as CPU copies, views of one storage as
that storage (`storage<g>`), in the one format of saved values (`capture.input_values.save_values`, which
the recorder writes too), and returns `specs` with `saved` naming each one's entry (`arg<index>`);
`reduce.repro` renders those inputs as `saved_input(name, ...)`, which reads the file with
`torch.load(weights_only=True)`. Both ways into the minifier save through here: the API (`reduce.api`,
values the caller passed) and a recorded run (`reduce.fx_load`, values `capture.child.graph_recorder`
kept, read with `capture.input_values.load_values`).
`with_node_values(base, out)` adds, for a wrong result, the value eager computes at each node (from
the saved inputs), so a node cut into an input carries it (`node:<name>` entries, the file read
memory-mapped); `keep_only(out, names)` leaves the final repro only the entries it reads. The file is
replaced whole, never rewritten in place: workers may have it mapped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import torch
import torch.fx

from pt2doctor.capture.input_values import has_values, is_index, save_values, write_values
from pt2doctor.model.minify import InputSpec, ScalarSpec, TensorSpec
from pt2doctor.reduce.fx_case import CALL_OPS, FxBase, effect_calls, module_root
from pt2doctor.reduce.repro import storage_extent, storage_groups

FILE_NAME = "repro_inputs.pt"


def values_matter(inputs: Sequence[Any], accuracy: bool) -> bool:
    """Real values matter for a wrong-result failure, and in integer tensors (indices, masks)."""
    real = [v for v in inputs if has_values(v)]
    return bool(real) and (accuracy or any(is_index(v) for v in real))


def save_repro_inputs(inputs: Sequence[Any], specs: Sequence[InputSpec], out: Path) -> list[InputSpec]:
    """Write the real tensor inputs to `out/repro_inputs.pt`; their specs name their entries."""
    alone = [value if isinstance(spec, TensorSpec) and spec.storage is None else None
             for value, spec in zip(inputs, specs)]
    storages, in_storage = {}, {}
    for group, members in storage_groups(specs).items():
        known = [(i, inputs[i]) for i, spec in enumerate(specs) if spec in members and has_values(inputs[i])]
        if len(known) == sum(1 for spec in specs if isinstance(spec, TensorSpec) and spec.storage == group):
            storages[f"storage{group}"] = _storage_of([(specs[i], value) for i, value in known])
            in_storage.update({i: f"storage{group}" for i, _ in known})
    named = {**in_storage, **save_values(alone, out / FILE_NAME, extra=storages)}
    if not (out / FILE_NAME).is_file():
        return list(specs)  # it could not be written: every input stays a random stand-in
    return [msgspec.structs.replace(spec, saved=named[i]) if i in named else spec for i, spec in enumerate(specs)]


def _storage_of(views: list[tuple[Any, torch.Tensor]]) -> torch.Tensor:
    """The flat storage that views of one tensor came from, rebuilt from their values (each written where
    its offset and strides put it; they agree where they overlap: they were read at one moment)."""
    first = views[0][0]
    flat = torch.zeros(max(storage_extent(spec) for spec, _ in views), dtype=getattr(torch, first.dtype))
    for spec, value in views:
        flat.as_strided(spec.shape, spec.stride, spec.offset).copy_(value.detach().cpu())
    return flat


# What the values of a graph's nodes may take in `repro_inputs.pt`: each candidate reads the file (memory-mapped).
NODE_VALUES_BUDGET = 64 * 2**20


def with_node_values(base: FxBase, out: Path, budget: int = NODE_VALUES_BUDGET) -> FxBase:
    """`base` with the value eager computes at each of its nodes saved beside the repro, where every input's
    value is known (saved, or a constant the graph holds, which is saved too): a node cut into an input
    (isolated, truncated, left out by ddmin) then gets the value the graph gave it there, not a random
    stand-in, so a wrong result that needs a constant, an inf, a subnormal or an in-range index made
    upstream survives the cut (torch's minifier does the same with `ConcreteProp`). Nodes past `budget`
    bytes, and graphs that call a function for its effect on global state (it would change this
    process's), keep random stand-ins; a graph that does not run is left as it was."""
    placeholders = [n for n in base.graph.nodes if n.op == "placeholder"]
    path = out / FILE_NAME
    saved = torch.load(path, weights_only=True, mmap=True) if path.is_file() else {}
    inputs = [_known_value(p, base.specs.get(p.name), saved) for p in placeholders]
    if effect_calls(base.graph) or any(v is _UNKNOWN for v in inputs):
        return base
    values: dict[str, torch.Tensor] = {}
    try:
        with torch.no_grad():
            _NodeValues(base, values, budget).run(*inputs)
    except Exception:  # the graph does not run eagerly here: its cuts stay random
        return base
    values.update({p.name: v.detach().cpu().clone() for p, v in zip(placeholders, inputs)
                   if "lifted_value" in p.meta and isinstance(v, torch.Tensor)})
    if not values:
        return base
    specs = dict(base.specs)
    for name in values:
        specs[name] = msgspec.structs.replace(specs[name], saved=f"node:{name}")
    write_values({**saved, **{f"node:{name}": value for name, value in values.items()}}, path)
    return dataclasses.replace(base, specs=specs)


def keep_only(out: Path, names: Iterable[str]) -> None:
    """Rewrite `repro_inputs.pt` with only the entries named: what the final repro reads."""
    path = out / FILE_NAME
    if not path.is_file():
        return
    saved = torch.load(path, weights_only=True, mmap=True)
    kept = {name: saved[name] for name in names if name in saved}
    if len(kept) < len(saved):
        write_values(kept, path)


_UNKNOWN = object()


def _known_value(placeholder: Any, spec: InputSpec | None, saved: dict[str, Any]) -> Any:
    if isinstance(spec, ScalarSpec):
        return spec.value
    if not isinstance(spec, TensorSpec) or spec.zero:
        return _UNKNOWN
    if spec.saved:
        value = saved.get(spec.saved)
        if value is not None and spec.storage is not None:  # its group's storage: the view is where it was
            value = value.as_strided(spec.shape, spec.stride, spec.offset)
        return _UNKNOWN if value is None else value.to(spec.device)
    lifted = placeholder.meta.get("lifted_value")
    return lifted if isinstance(lifted, torch.Tensor) and has_values(lifted) else _UNKNOWN


class _NodeValues(torch.fx.Interpreter):
    """Runs the graph, keeping a CPU copy of each call node's tensor value (as its spec describes it) while
    the budget lasts; the interpreter frees the rest as it goes."""

    def __init__(self, base: FxBase, values: dict[str, torch.Tensor], budget: int) -> None:
        super().__init__(torch.fx.GraphModule(module_root(base.modules), base.graph))
        self.specs, self.values, self.left = base.specs, values, budget

    def run_node(self, n: torch.fx.Node) -> Any:
        result = super().run_node(n)
        spec = self.specs.get(n.name)
        if (n.op in CALL_OPS and isinstance(spec, TensorSpec) and isinstance(result, torch.Tensor)
                and has_values(result)):
            size = result.numel() * result.element_size()
            if size <= self.left and tuple(result.shape) == spec.shape and str(result.dtype) == f"torch.{spec.dtype}":
                self.values[n.name] = result.detach().cpu().clone()
                self.left -= size
        return result

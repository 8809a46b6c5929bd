"""Which recorded properties of its inputs a minimal repro's failure needs: each one taken away alone.

Contract: `probe_input_needs(case, oracle, stage) -> tuple[InputNeed, ...]` takes, for every tensor input
of the (verified, minimal) case and every property in `PROBES` that the input has and its repro renders,
the case with that one input rebuilt without it (`fx_case.rebase`, so a layout the graph cannot take is
never run), and asks the same oracle as the reduction, all in one batch. A property is needed when the
case without it PASSES; a different failure, a crash or a timeout says nothing and is not reported.
The properties (`model.minify.InputProperty`):
- `non-leaf`: an input with autograd history, rebuilt as a leaf that requires grad;
- `requires_grad`: a leaf that requires grad, rebuilt as one that does not;
- `non-contiguous` / `channels_last`: its recorded strides, rebuilt contiguous;
- `storage offset`: a view starting inside its storage, rebuilt at offset 0;
- `ZeroTensor`: autograd's efficient zeros, rebuilt as a plain tensor;
- `shared storage`: a view of a storage another input also views, rebuilt on a storage of its own.
Autograd properties are rendered only in a repro of a Dynamo graph (after AOT, inputs are plain) and
layout only for random inputs (a saved value is loaded contiguous), so only those are probed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import msgspec

from pt2doctor.model.minify import InputNeed, InputProperty, InputSpec, Stage, TensorSpec
from pt2doctor.reduce.core import Outcome
from pt2doctor.reduce.fx_case import FxCase, rebase


def contiguous_stride(shape: Sequence[int]) -> tuple[int, ...]:
    stride, step = [], 1
    for size in reversed(shape):
        stride.append(step)
        step *= max(size, 1)
    return tuple(reversed(stride))


def _channels_last(spec: TensorSpec) -> bool:
    if len(spec.shape) != 4:
        return False
    n, c, h, w = spec.shape
    return spec.stride == (h * w * c, 1, w * c, c) and spec.stride != contiguous_stride(spec.shape)


def _laid_out(spec: TensorSpec) -> bool:
    return not spec.saved and not spec.zero and spec.stride != contiguous_stride(spec.shape)


@dataclass(frozen=True, slots=True)
class Probe:
    property: InputProperty
    applies: Callable[[TensorSpec, Stage], bool]
    without: Callable[[TensorSpec], TensorSpec]
    rebuilt_as: Callable[[TensorSpec], str]


PROBES: tuple[Probe, ...] = (
    Probe("non-leaf", lambda s, stage: stage is Stage.DYNAMO and s.requires_grad and not s.leaf,
          lambda s: msgspec.structs.replace(s, leaf=True), lambda s: "a leaf tensor that requires grad"),
    Probe("requires_grad", lambda s, stage: stage is Stage.DYNAMO and s.requires_grad and s.leaf,
          lambda s: msgspec.structs.replace(s, requires_grad=False), lambda s: "a tensor that does not require grad"),
    Probe("channels_last", lambda s, stage: _laid_out(s) and _channels_last(s),
          lambda s: msgspec.structs.replace(s, stride=contiguous_stride(s.shape)),
          lambda s: f"contiguous strides {contiguous_stride(s.shape)}"),
    Probe("non-contiguous", lambda s, stage: _laid_out(s) and not _channels_last(s),
          lambda s: msgspec.structs.replace(s, stride=contiguous_stride(s.shape)),
          lambda s: f"contiguous strides {contiguous_stride(s.shape)}"),
    Probe("storage offset", lambda s, stage: not s.saved and not s.zero and s.offset > 0,
          lambda s: msgspec.structs.replace(s, offset=0), lambda s: "a tensor at offset 0"),
    Probe("ZeroTensor", lambda s, stage: s.zero, lambda s: msgspec.structs.replace(s, zero=False),
          lambda s: "a plain tensor"),
    # a group of its own (`reduce.repro.storage_groups`): the same view, of a copy of the storage
    Probe("shared storage", lambda s, stage: s.storage is not None and not s.zero,
          lambda s: msgspec.structs.replace(s, storage=-1 - (s.storage or 0)),
          lambda s: "a tensor with a storage of its own"),
)


def probe_input_needs(case: FxCase, oracle: Callable[[Sequence[FxCase]], Sequence[Outcome]],
                      stage: Stage) -> tuple[InputNeed, ...]:
    names = [n.name for n in case.graph.nodes if n.op == "placeholder"]
    asked: list[tuple[InputNeed, FxCase]] = []
    for index, spec in enumerate(case.inputs):
        if not isinstance(spec, TensorSpec):
            continue
        for probe in (p for p in PROBES if p.applies(spec, stage)):
            rebuilt = rebase(case, _replaced(case.inputs, index, probe.without(spec)))
            if rebuilt is not None:
                asked.append((InputNeed(index, names[index], probe.property, probe.rebuilt_as(spec)), rebuilt))
    if not asked:
        return ()
    outcomes = oracle([rebuilt for _, rebuilt in asked])
    return tuple(need for (need, _), outcome in zip(asked, outcomes) if outcome is Outcome.PASSES)


def _replaced(inputs: tuple[InputSpec, ...], index: int, spec: InputSpec) -> list[InputSpec]:
    specs = list(inputs)
    specs[index] = spec
    return specs

"""Minifier values: what a graph's inputs look like, how it failed, and what the reduction found.

Contract: frozen, torch-free values shared by the graph recorder (capture), the reducer (reduce)
and the reports. `TensorSpec`/`ScalarSpec` describe inputs by metadata only (values are random
in repros unless a saved-values file is named); dtypes and devices are torch's own spellings
(`"float32"`, `"cpu"`). `FailureSignature.text` is already normalised (see
`model.signature`), so two failures are "the same" exactly when their signatures are equal.
Input specs are msgspec structs tagged by `kind` (a union of them decodes; `msgspec.structs.replace`
changes one).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Literal, Union

import msgspec


# PyTorch's accuracy rule's tolerance (`torch._dynamo.utils.same`, as the minifier's `same_two_models` uses it):
# the default of every accuracy check pt2doctor makes, from the CLI to the repro.
DEFAULT_TOLERANCE = 1e-4


class Stage(str, Enum):
    """Which graph a repro compiles: the one Dynamo hands the backend, the one AOT hands Inductor, or an
    exported program's graph, exported again and compiled by AOTInductor."""

    DYNAMO = "dynamo"
    AOT = "aot"
    AOTI = "aoti"


class FailureKind(str, Enum):
    EXCEPTION = "exception"
    SIGNAL = "signal"
    ACCURACY = "accuracy"


# The one description of an accuracy failure: raised by every repro's check (`reduce.repro`) and
# written by the graph recorder when it sees one (`capture.child.graph_recorder`).
ACCURACY_TYPE = "AccuracyMismatch"
ACCURACY_MESSAGE = "compiled result differs from eager beyond the fp64-referenced tolerance"


@dataclass(frozen=True, slots=True)
class FailureSignature:
    """How a graph fails: `kind` plus normalised `text` (`Type: message`, `SIGSEGV`, `accuracy`)."""

    kind: FailureKind
    text: str

    def __str__(self) -> str:
        return self.text


class TensorSpec(msgspec.Struct, frozen=True, tag="tensor", tag_field="kind"):
    """A tensor input by metadata; `dynamic` lists the dims that were symbolic (pytorch#114296)."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: str = "float32"
    device: str = "cpu"
    requires_grad: bool = False
    dynamic: tuple[int, ...] = ()
    saved: str = ""  # the entry in the repro's saved-values file when its values matter, else random
    bounds: tuple[int, int] | None = None  # an integer input's recorded min and max: random values stay valid
    offset: int = 0  # storage offset
    leaf: bool = True  # False: it has autograd history (a backend may treat a non-leaf input differently)
    zero: bool = False  # a ZeroTensor (autograd's efficient zeros), rebuilt as one

    @property
    def kind(self) -> Literal["tensor"]:
        return "tensor"


class ScalarSpec(msgspec.Struct, frozen=True, tag="scalar", tag_field="kind"):
    """A Python scalar input (a SymInt when `dynamic`), or None."""

    value: int | float | bool | None
    dynamic: bool = False

    @property
    def kind(self) -> Literal["scalar"]:
        return "scalar"


# Written as JSON objects tagged by `kind` ("tensor", "scalar"), so a list of them decodes as the union.
InputSpec = Union[TensorSpec, ScalarSpec]


class BackendKind(str, Enum):
    NAMED = "named"  # a registered backend: torch.compile(backend="name")
    SOURCE = "source"  # a callable from the user's script whose source we have
    STUB = "stub"  # a callable whose source is unavailable: a stub raising the recorded error


@dataclass(frozen=True, slots=True)
class BackendSpec:
    kind: BackendKind
    name: str
    source: str = ""


@dataclass(frozen=True, slots=True)
class MinifyResult:
    """What `pt2doctor minify` reports (written as minify.json)."""

    graph: str
    stage: Stage
    signature: FailureSignature
    nodes_before: int
    nodes_after: int
    ops: tuple[str, ...]
    culprit_ops: tuple[str, ...]
    queries: int
    cache_hits: int
    time_s: float
    verified: bool
    repro_path: str
    stopped_early: str | None = None
    passes: tuple[tuple[str, int], ...] = ()
    outcomes: tuple[tuple[str, int], ...] = ()

    @property
    def minimal(self) -> bool:
        """Only a verified repro that ran to a fixed point is presented as minimal."""
        return self.verified and self.stopped_early is None

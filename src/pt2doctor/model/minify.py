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

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Literal

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
    # inputs with the same number are views of one storage (the program passed views of one tensor); their
    # strides and offsets are in it, and a saved value (`saved`) is that storage's
    storage: int | None = None

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
InputSpec = TensorSpec | ScalarSpec


class NodeOrigin(msgspec.Struct, frozen=True, omit_defaults=True):
    """Where one node of a recorded graph came from in the user's program (FX node provenance, kept
    when the graph is recorded): `op` is the node's own (`aten.ge.Scalar`); `call` the user-level call
    Dynamo traced that produced it (`margin_ranking_loss`, `mul`; for a backward node, its forward
    call's); `aten` the aten op a decomposition rewrote into it when that differs from `op`
    (`aten._to_copy.default`); `file`, `line`, `code` the user's source line, `module` the
    `nn.Module` path it ran under (`self.sub`). A field torch did not know stays empty."""

    op: str
    call: str = ""
    aten: str = ""
    file: str = ""
    line: int = 0
    code: str = ""
    module: str = ""

    def describe(self) -> str:
        """`margin_ranking_loss at x.py:14 (loss = F.margin_ranking_loss(a, b, t))`, or what of it is known."""
        what = self.call or self.aten or self.op or "code"
        what += f" (decomposed from {self.aten})" if self.call and self.aten else ""
        where = f" at {self.file.rsplit('/', 1)[-1]}:{self.line}" if self.file else ""
        module = f" in {self.module}" if self.module else ""
        code = f" ({self.code})" if self.code else ""
        return f"{what}{module}{where}{code}"


def describe_calls(calls: Sequence[NodeOrigin]) -> str:
    """`calls` (`source_calls`) said once per source line: `torch.arange, operator.mul at x.py:15 (y = ...)`;
    each call keeps what a decomposition rewrote and the module it ran under."""
    lines: dict[tuple[str, int, str], list[NodeOrigin]] = {}
    for call in calls:
        lines.setdefault((call.file, call.line, call.code), []).append(call)
    said = []
    for (file, line, code), on_line in lines.items():
        what = ", ".join(NodeOrigin(op=c.op, call=c.call, aten=c.aten, module=c.module).describe() for c in on_line)
        where = f" at {file.rsplit('/', 1)[-1]}:{line}" if file else ""
        said.append(what + where + (f" ({code})" if code else ""))
    return "; ".join(said)


def source_calls(origins: Sequence[NodeOrigin]) -> tuple[NodeOrigin, ...]:
    """The distinct user-level calls and lines among `origins`, in order: what a reader of the user's
    program looks for. Several nodes of one call are one entry; a node torch knows only the line of
    (a pass created it) adds nothing where a call on that line is named, else it stands as its op."""
    named = {(o.file, o.line) for o in origins if o.call}
    seen: dict[tuple[str, str, str, int, str], NodeOrigin] = {}
    for o in origins:
        if not (o.call or o.aten or o.file) or (not o.call and o.file and (o.file, o.line) in named):
            continue
        what = o.call or o.aten or o.op
        aten = o.aten if o.call else ""  # the op a decomposition rewrote: where a decomposition bug lives
        seen.setdefault((what, aten, o.file, o.line, o.module),
                        NodeOrigin(op="", call=what, aten=aten, file=o.file, line=o.line, code=o.code, module=o.module))
    return tuple(seen.values())


InputProperty = Literal["non-leaf", "requires_grad", "non-contiguous", "channels_last", "storage offset", "ZeroTensor",
                        "shared storage"]


class InputNeed(msgspec.Struct, frozen=True):
    """A property of one input of the minimal repro that the failure needs: rebuilt without it (a leaf
    for `non-leaf`, contiguous for `non-contiguous`, ...) and checked alone by the same oracle, the repro
    passed (`reduce.input_needs`). `input` is its position, `name` the graph's placeholder."""

    input: int
    name: str
    property: InputProperty
    without: str  # what the input was rebuilt as: "a leaf tensor", "contiguous strides (4, 1)", ...

    def describe(self) -> str:
        return f"input {self.input} ({self.name}) must be {_PROPERTY_WORDS[self.property]}: as {self.without} it passes"


_PROPERTY_WORDS: dict[str, str] = {
    "non-leaf": "a non-leaf tensor (with autograd history)", "requires_grad": "a tensor that requires grad",
    "non-contiguous": "non-contiguous", "channels_last": "channels_last", "storage offset": "at a storage offset",
    "ZeroTensor": "a ZeroTensor", "shared storage": "a view sharing its storage with another input",
}


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
class VerifyRuns:
    """How a repro fared where it was verified: `failed` of `runs` fresh interpreters, started side by
    side, failed the way the original did (a fresh interpreter's run: a new `python`, or, where no GPU is visible, a
    child forked from one that imported torch and nothing else, the state a repro is in after its import lines:
    `processes.fresh_forks`). Verified means every one did; some but not all is a coin toss
    (flaky), never a deterministic bug."""

    failed: int
    runs: int

    @property
    def every_time(self) -> bool:
        return self.runs > 0 and self.failed == self.runs

    @property
    def flaky(self) -> bool:
        return 0 < self.failed < self.runs

    def __str__(self) -> str:
        return f"failed the same way in {self.failed}/{self.runs} runs"


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
    origins: tuple[NodeOrigin, ...] = ()  # where the minimal graph's nodes came from (`source_calls`)
    input_needs: tuple[InputNeed, ...] = ()  # input properties a verified repro's failure needs
    verify_runs: VerifyRuns | None = None  # how often repro.py failed where it was verified (None: not run)
    # the same minimal graph in PyTorch's idiom (`reduce.short_repro`), written beside it, not yet verified
    short_repro: str | None = None
    test_repro: str | None = None

    @property
    def minimal(self) -> bool:
        """Only a verified repro that ran to a fixed point is presented as minimal."""
        return self.verified and self.stopped_early is None

"""The graph recording's records: one `GraphEntry` per recorded graph, one `GraphFailure` per failure.

Contract: the graph recorder (`capture.child.graph_recorder`) appends them, one JSON line each, to
`RUN_DIR/graphs/index.jsonl` and `failures.jsonl` (and an `Unrecorded` per graph it could not write to
`unrecorded.jsonl`, a `Cached` per Dynamo graph whose after-AOT graphs AOTAutograd's cache served to `cached.jsonl`)
with the codec (`model.serialize.append_line`);
every reader (`reduce.fx_load`, `diagnose.procedure`) reads them back with `read_index` /
`read_failures`, which raise `RecordError` (file and line) for a line that is not a record. The
JSON keys are the field names; a failure's `tolerance` (accuracy failures) and `values` (when its
inputs were saved) are left out when empty. What each field means: `capture.child.graph_recorder`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import msgspec

from pt2doctor.model.minify import BackendSpec, InputSpec, NodeOrigin, Stage, TensorSpec
from pt2doctor.model.serialize import read_lines

AotKind = Literal["forward", "backward", "inference"]
FailurePhase = Literal["compile", "run", "accuracy"]


class GraphEntry(msgspec.Struct, frozen=True):
    """One recorded graph: `id` (`g0003`) names its files; `parent` is the Dynamo graph an after-AOT
    graph came from; `values` the file of input values kept when it was recorded; `origins` where each
    call node came from in the user's program; `grad_enabled` the grad mode it was compiled under (a Dynamo graph
    compiled under `torch.no_grad()` is an inference graph to AOTAutograd: its repro runs it so too)."""

    id: str
    stage: Stage
    compile_id: str | None = None
    parent: str | None = None
    aot_kind: AotKind | None = None
    backend: BackendSpec | None = None
    config: tuple[str, ...] = ()
    inputs: tuple[InputSpec, ...] = ()
    nodes: int = 0
    constants: str | None = None
    submodules: dict[str, str] = {}
    values: str | None = None
    origins: tuple[NodeOrigin, ...] = ()  # one per call node, in graph order (`reduce.fx_load` matches them back)
    grad_enabled: bool = True

    @property
    def on_cuda(self) -> bool:
        """Whether the graph's tensor inputs were on a CUDA device when it was recorded."""
        return any(isinstance(s, TensorSpec) and s.device.startswith("cuda") for s in self.inputs)


class GraphFailure(msgspec.Struct, frozen=True, omit_defaults=True):
    """One failure of a recorded graph: `description` is `Type: first line` of what it raised."""

    graph: str
    phase: FailurePhase
    description: str
    tolerance: float | None = None  # the accuracy check's, for an accuracy failure
    values: str | None = None  # the file of its inputs as they were when it failed


class Unrecorded(msgspec.Struct, frozen=True):
    """A graph the recorder could not write (it was compiled as if no recorder were installed): its stage, compile
    id and `Type: first line` of what writing it raised."""

    stage: Stage
    compile_id: str | None
    description: str


class Cached(msgspec.Struct, frozen=True):
    """A Dynamo graph whose after-AOT graphs AOTAutograd's cache served: none of them was traced in this run, so none
    was recorded, judged or watched as it ran; what the run shows of that graph is its Dynamo graph's."""

    graph: str


def values_files(graph_id: str) -> tuple[str, str, str]:
    """The files a graph's input values are kept in, one per moment (never the same file twice: a save that
    fails must not cost what an earlier one kept): when it was recorded (index inputs), before its first
    call (all of them, in the failure workflows: a kernel that kills the process leaves no failure
    record), and when it failed."""
    return f"{graph_id}.inputs.pt", f"{graph_id}.call.inputs.pt", f"{graph_id}.failed.inputs.pt"


def read_index(graphs: Path) -> list[GraphEntry]:
    return read_lines(graphs / "index.jsonl", GraphEntry)


def read_failures(graphs: Path) -> list[GraphFailure]:
    return read_lines(graphs / "failures.jsonl", GraphFailure)


def read_cached(graphs: Path) -> list[Cached]:
    """The Dynamo graphs whose after-AOT graphs came from AOTAutograd's cache (`cached.jsonl`, only where any did)."""
    return read_lines(graphs / "cached.jsonl", Cached)


def read_unrecorded(graphs: Path) -> list[Unrecorded]:
    """The graphs the recorder could not write (`unrecorded.jsonl`, only where there were any)."""
    return read_lines(graphs / "unrecorded.jsonl", Unrecorded)

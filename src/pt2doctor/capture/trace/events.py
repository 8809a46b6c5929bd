"""Typed events read from a structured trace (TORCH_TRACE), one frozen value per kind.

Contract: `trace_reader` produces these and nothing else; events the reader does not model are kept
as `UnknownEvent` with their kind, never dropped silently (tlparse's `types.rs`). Payloads that a
finding may never need are not read: `PayloadRef` remembers where they are in the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pt2doctor.model.ids import CompileId, SourceLoc


@dataclass(frozen=True, slots=True)
class PayloadRef:
    """Where an event's payload lies: read it only when asked (`read()`)."""

    path: str
    offset: int
    length: int

    def read(self) -> str:
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            raw = handle.read(self.length)
        return "\n".join(line[1:] for line in raw.decode("utf-8", "replace").split("\n") if line)


@dataclass(frozen=True, slots=True)
class Event:
    """`compile_id` is unique in the trace (`CompileId.generation`); `generation` is the reset generation the
    event came in, for an event without a compile id that names compiles (`graph_execution`)."""

    compile_id: CompileId | None
    rank: int | None
    timestamp: float | None
    generation: int = 0


@dataclass(frozen=True, slots=True)
class DynamoStart(Event):
    stack: tuple[SourceLoc, ...] = ()


@dataclass(frozen=True, slots=True)
class CompilationMetrics(Event):
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GraphBreakReason(Event):
    text: str = ""


@dataclass(frozen=True, slots=True)
class RecompileReasons(Event):
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DynamoError(Event):
    text: str = ""


@dataclass(frozen=True, slots=True)
class Artifact(Event):
    """A named payload: graphs, output code, guards. `kind` is the trace key or artifact name."""

    kind: str = ""
    payload: PayloadRef | None = None


@dataclass(frozen=True, slots=True)
class UnknownEvent(Event):
    kind: str = ""
    raw: dict[str, Any] = field(default_factory=dict)

"""The collectives one rank of a job issued, in order, as torch's Flight Recorder recorded them (NCCL and gloo
process groups), and the first place the ranks' sequences part.

A rank's child writes its record as `rank-N/collectives.json` (`RankCollectives`) when it ends, when it raises
(a collective's own timeout), and just before pt2doctor's `--timeout` stops it; an NCCL rank that torch's
watchdog aborts leaves torch's own dump instead (`capture.collectives` reads both).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pt2doctor.model.ids import SourceLoc

COLLECTIVES_FILE = "collectives.json"

CallState = Literal["scheduled", "started", "completed"]


@dataclass(frozen=True, slots=True)
class CollectiveCall:
    """One collective a rank issued: its sequence number in its process group, the op, its tensors."""

    seq: int  # the process group's collective sequence number (the same on every rank for the same call)
    group: str  # the process group (`0`, or its description: `default_pg`)
    op: str  # `all_reduce`, `barrier`, `_allgather_base` (torch's profiling name, backend prefix dropped)
    input_sizes: tuple[tuple[int, ...], ...] = ()
    dtypes: tuple[str, ...] = ()  # the inputs' dtypes (`Float`)
    state: CallState = "completed"
    where: SourceLoc | None = None  # the user's innermost line that issued it (for a compiled graph: its call)
    compiled: bool = False  # issued by a compiled graph (a Dynamo/FX frame on its stack)
    graph: str = ""  # the compiled function that issued it, `step (train.py:11)`
    issued_at: float | None = None  # when (time.time()), as the recorder stamped it

    @property
    def signature(self) -> tuple[str, tuple[tuple[int, ...], ...], tuple[str, ...]]:
        """What must agree across ranks for the call to pair up: the op and its tensors."""
        return self.op, self.input_sizes, self.dtypes


@dataclass(frozen=True, slots=True)
class RankCollectives:
    """What one rank's child wrote: the calls (oldest first), and from where torch took them."""

    calls: tuple[CollectiveCall, ...] = ()
    source: str = ""  # `flight recorder` (the child's dump), `flight recorder (NCCL watchdog dump)`
    when: str = ""  # `at exit`, `after an exception`, `before the timeout`
    dropped: bool = False  # the recorder's buffer wrapped: the oldest calls are not in `calls`


@dataclass(frozen=True, slots=True)
class RankCall:
    """What one rank issued at the sequence number where the ranks part."""

    label: str  # `rank 1`
    call: CollectiveCall | None  # None: nothing at that number (it issued fewer, or is still before it)
    issued: int  # collectives it issued in that group in all
    last: CollectiveCall | None = None  # its last call, where `call` is None


@dataclass(frozen=True, slots=True)
class CollectiveParting:
    """The first collective, in one process group, that the ranks did not issue alike."""

    group: str
    seq: int
    calls: tuple[RankCall, ...]  # every rank, the reference first
    detail: str  # what happened there, in words
    fix: str = ""

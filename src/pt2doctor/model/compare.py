"""What differs between two sessions, and what exceeds a budget: the values `compare` and `check` report.

One shape serves run vs run (a torch upgrade, a code change) and rank vs rank: a `Comparison` is a
list of `Change`s, each about one thing (a frame, a graph break, a recompiled function, a failure),
saying whether it appeared, disappeared or changed, with its value on each side and the cause in
words. Analysis (`analysis.compare`) decides them; renderers only format them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class ChangeKind(str, Enum):
    TORCH = "torch"  # the torch version differs: the context for every other change
    FAILURE = "failure"
    GRAPH_BREAK = "graph_break"
    RECOMPILE = "recompile"
    FRAME = "frame"  # a compiled function, its graphs and ops
    COMPILE_TIME = "compile_time"
    CACHE = "cache"  # the compile caches, in all (run vs run) or for one graph (rank vs rank)
    ACCURACY = "accuracy"
    GRAPH_INPUTS = "graph_inputs"  # one graph, compiled by two ranks for inputs of other dtype, shape or strides
    COLLECTIVES = "collectives"  # one graph, issuing other collectives on two ranks
    COLLECTIVE_SCHEDULE = "collective_schedule"  # one graph, its collectives in another order in Inductor's code
    COLLECTIVE_OUTPUTS = "collective_outputs"  # one graph, its scheduled collectives outputting other tensors
    EXECUTION_ORDER = "execution_order"  # the compiled graphs ran in another order
    RUNTIME_ESTIMATE = "runtime_estimate"  # one graph, estimated by Inductor to run much longer on one rank


class Direction(str, Enum):
    ADDED = "added"  # only in the second session
    REMOVED = "removed"  # only in the first
    CHANGED = "changed"


@dataclass(frozen=True, slots=True)
class Change:
    kind: ChangeKind
    direction: Direction
    subject: str  # what it is about: `f (train.py:12)`, a break's place, a failure's exception
    before: str = ""  # its value in the first session ("" when added)
    after: str = ""  # its value in the second ("" when removed)
    detail: str = ""  # the cause in words: a break's reason, a recompile's failed guard


@dataclass(frozen=True, slots=True)
class Comparison:
    before: str  # what the first session is (a path, `rank 0`)
    after: str
    changes: tuple[Change, ...] = ()

    @property
    def same(self) -> bool:
        """Nothing compiled, broke, recompiled, failed or was judged differently. A compile time is wall-clock
        time: on a loaded machine two runs of one program differ by several times, so it is shown, never
        counted (`check --max-compile-time` gates it)."""
        return all(c.kind is ChangeKind.COMPILE_TIME for c in self.changes)


@dataclass(frozen=True, slots=True)
class Budget:
    """What a run may cost (`pt2doctor check`, the pytest marker); None: no limit on it."""

    graph_breaks: int | None = None
    recompiles: int | None = None
    compile_time_s: float | None = None


@dataclass(frozen=True, slots=True)
class Overrun:
    """One budget a run exceeded (or one new graph break or recompile against a baseline)."""

    what: str  # `graph_breaks`, `recompiles`, `compile_time_s`, `new graph break`, `new recompile`
    limit: float
    actual: float
    evidence: tuple[str, ...] = ()  # the breaks, recompiles or frames that make up `actual`

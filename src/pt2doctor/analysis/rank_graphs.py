"""One compiled graph across ranks: the checks of tlparse's multi-rank view that need the graph itself.

Contract: `graph_changes(reference, other) -> tuple[Change, ...]` aligns the graphs of two ranks by the
function compiled and the n-th compile of it (compile ids shift as soon as one rank compiles one more frame),
and for each graph that both ranks compiled says where they differ:
- `GRAPH_INPUTS`: the metadata of its inputs (dtype, shape, strides, device) as Dynamo printed them; the
  names Dynamo gives symbols (`s77`) are not compared, their places are;
- `COLLECTIVES`: the collectives it issues, in order;
- `CACHE`: whether the compile caches hit or missed for it.
Each change carries its cause in words; `consequences(changes)` says what those differences lead to in a job.
Graphs only one rank compiled are `analysis.compare`'s (a frame, a recompile, a graph break).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pt2doctor.analysis.compare import place
from pt2doctor.model import Session
from pt2doctor.model.compare import Change, ChangeKind, Direction
from pt2doctor.model.session import Compile

_SYMBOL = re.compile(r"\b([su])\d+\b")  # a symbol's name is the rank's own counter, not a property of the graph

_CAUSES = {
    ChangeKind.GRAPH_INPUTS: "the ranks call this graph with other tensors: a rank-dependent shape (an uneven "
                             "shard, a last short batch) or dtype, so each rank compiled it for its own inputs",
    ChangeKind.COLLECTIVES: "a rank-dependent branch in the compiled function issues other collectives here",
    ChangeKind.CACHE: "one rank loaded this graph from a compile cache and the other compiled it: their caches "
                      "differ (a cache directory per rank, a config or environment variable only some ranks set)",
}
_CONSEQUENCES = {
    ChangeKind.GRAPH_INPUTS: "collectives in or after the graphs whose inputs differ get tensors of other sizes on "
                             "different ranks (a hang, or a reduction over mismatched data), and the ranks run "
                             "differently specialized code",
    ChangeKind.COLLECTIVES: "the ranks' collectives no longer pair up: a hang in a collective, or values reduced "
                            "with the wrong peer's",
    ChangeKind.CACHE: "the rank that compiles from scratch starts later, and every other rank waits for it at the "
                      "first collective (a straggler, or a collective timeout on a large model)",
}


def graph_changes(reference: Session, other: Session) -> tuple[Change, ...]:
    ours, theirs = _graphs(reference.compiles), _graphs(other.compiles)
    changes: list[Change] = []
    for key in (k for k in ours if k in theirs):
        a, b = ours[key], theirs[key]
        for kind, value in ((ChangeKind.GRAPH_INPUTS, _inputs), (ChangeKind.COLLECTIVES, _collectives),
                            (ChangeKind.CACHE, _cache)):
            before, after = value(a), value(b)
            if before is not None and after is not None and before != after:
                changes.append(Change(kind, Direction.CHANGED, key, before, after, _CAUSES[kind]))
    return tuple(changes)


def consequences(changes: Iterable[Change]) -> list[str]:
    kinds = {c.kind for c in changes}
    return [text for kind, text in _CONSEQUENCES.items() if kind in kinds]


def _graphs(compiles: Iterable[Compile]) -> dict[str, Compile]:
    seen: dict[str, int] = {}
    graphs = {}
    for c in sorted(compiles, key=lambda c: c.compile_id):
        where = place(c.function, c.file, c.line)
        n = seen[where] = seen.get(where, -1) + 1
        graphs[f"{where} graph {n}"] = c
    return graphs


def _inputs(c: Compile) -> str | None:
    return ", ".join(_SYMBOL.sub(r"\1?", i) for i in c.inputs) if c.inputs else None


def _collectives(c: Compile) -> str | None:
    return ", ".join(c.collectives) or "none" if c.status == "ok" else None


def _cache(c: Compile) -> str | None:
    if not c.cache_hits and not c.cache_misses:
        return None
    return "hit" if not c.cache_misses else "miss" if not c.cache_hits else f"{c.cache_hits} hit(s), {c.cache_misses} miss(es)"

"""One compiled graph across ranks: the checks of tlparse's multi-rank view that need the graph itself.

Contract: `graph_changes(reference, other) -> tuple[Change, ...]` aligns the graphs of two ranks by the
function compiled and the n-th compile of it (compile ids shift as soon as one rank compiles one more frame),
and for each graph that both ranks compiled says where they differ:
- `GRAPH_INPUTS`: the metadata of its inputs (dtype, shape, strides, device) as Dynamo printed them; the
  names Dynamo gives symbols (`s77`) are not compared, their places are, and a device is compared as "the rank's
  own" (`cuda:own`: cuda:0 on rank 0 is cuda:1 on rank 1), not by its index;
- `COLLECTIVES`: the collectives it issues, in order;
- `CACHE`: whether the compile caches hit or missed for it;
- `COLLECTIVE_SCHEDULE`: the collective kernels in the order Inductor's scheduler placed them (torch's
  `inductor_collective_schedule`), where the Dynamo graphs' collectives agree (where they do not,
  `COLLECTIVES` says it already): an Inductor pass that reorders or buckets them ran otherwise;
- `COLLECTIVE_OUTPUTS`: the tensors those collectives output (`inductor_runtime_and_tensor_meta`);
- `RUNTIME_ESTIMATE`: Inductor's estimate of the graph's runtime (the same artifact), where one rank's is
  more than `RUNTIME_RATIO` times the other's (estimates of zero, as on CPU, say nothing).
And across the whole run, `EXECUTION_ORDER`: the order the compiled graphs ran in (`Session.graph_execution`:
the call counter's record, or torch's `graph_execution` artifact in a copied trace), by the same alignment,
where both ranks have it; the first place they differ.
Each change carries its cause in words; `consequences(changes)` says what those differences lead to in a job.
`parity_gaps(label, session)` is tlparse's check within one process: graphs whose output code calls other
collectives (or in another order) than the scheduler placed.
Graphs only one rank compiled are `analysis.compare`'s (a frame, a recompile, a graph break).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace

from pt2doctor.analysis.compare import place
from pt2doctor.model import Session
from pt2doctor.model.compare import Change, ChangeKind, Direction
from pt2doctor.model.ids import CompileId
from pt2doctor.model.job import ParityGap
from pt2doctor.model.session import Compile

_SYMBOL = re.compile(r"\b([su])\d+\b")  # a symbol's name is the rank's own counter, not a property of the graph

_CAUSES = {
    ChangeKind.GRAPH_INPUTS: "the ranks call this graph with other tensors: a rank-dependent shape (an uneven "
                             "shard, a last short batch) or dtype, so each rank compiled it for its own inputs",
    ChangeKind.COLLECTIVES: "a rank-dependent branch in the compiled function issues other collectives here",
    ChangeKind.CACHE: "one rank loaded this graph from a compile cache and the other compiled it: their caches "
                      "differ (a cache directory per rank, a config or environment variable only some ranks set)",
    ChangeKind.COLLECTIVE_SCHEDULE: "the same graph was compiled to code that issues its collectives in another "
                                    "order: an Inductor pass that reorders or buckets collectives (a config set on "
                                    "some ranks only, a runtime estimate that differs) decided otherwise per rank",
    ChangeKind.COLLECTIVE_OUTPUTS: "the collectives Inductor scheduled output tensors of other shapes or dtypes on "
                                   "each rank: they were compiled for other inputs",
    ChangeKind.EXECUTION_ORDER: "the ranks ran their compiled graphs in another order: a rank-dependent branch "
                                "between compiled calls, or a graph only one rank recompiled or skipped",
    ChangeKind.RUNTIME_ESTIMATE: "Inductor estimates this graph to take much longer on one rank: it was compiled "
                                 "for more work there (an uneven shard), or with other kernels (a config or a "
                                 "device that differs)",
}
_SHAPES_FIX = ("give every rank the same shapes (pad the short batch or shard, drop_last=True, or "
               "torch._dynamo.mark_dynamic on the dimension that differs)")
# what each difference leads to in a job, and its fix: most likely first (the first found is the one said)
_CONSEQUENCES = {
    ChangeKind.COLLECTIVES: ("the ranks' collectives no longer pair up: a hang in a collective, or values reduced "
                             "with the wrong peer's",
                             "issue the same collectives on every rank: no rank-dependent branch around a "
                             "collective in compiled code"),
    ChangeKind.COLLECTIVE_SCHEDULE: ("the ranks issue the same collectives in another order at run time: each waits "
                                     "in a different one (a hang), or pairs its tensors with another collective's",
                                     "set the same Inductor config on every rank (the passes that reorder or bucket "
                                     "collectives)"),
    ChangeKind.COLLECTIVE_OUTPUTS: ("a collective pairs tensors of other sizes across ranks: a hang, or a reduction "
                                    "over mismatched data", _SHAPES_FIX),
    ChangeKind.GRAPH_INPUTS: ("collectives in or after the graphs whose inputs differ get tensors of other sizes on "
                              "different ranks (a hang, or a reduction over mismatched data), and the ranks run "
                              "differently specialized code", _SHAPES_FIX),
    ChangeKind.EXECUTION_ORDER: ("from there on the ranks' steps differ: collectives in or after those graphs are "
                                 "issued in another order on each rank (a hang, or values reduced with the wrong "
                                 "peer's)", "no rank-dependent branch between compiled calls"),
    ChangeKind.CACHE: ("the rank that compiles from scratch starts later, and every other rank waits for it at the "
                       "first collective (a straggler, or a collective timeout on a large model)",
                       "give every rank the same compile cache (one TORCHINDUCTOR_CACHE_DIR, the same config and "
                       "environment), or warm it before the job"),
    ChangeKind.RUNTIME_ESTIMATE: ("the slower rank arrives late at every collective after this graph and the others "
                                  "wait for it (a straggler); passes that plan by these estimates (reordering, "
                                  "bucketing) decide otherwise on each rank", "balance the work across ranks"),
}


def graph_changes(reference: Session, other: Session) -> tuple[Change, ...]:
    ours, theirs = _graphs(_on_own_device(reference.compiles)), _graphs(_on_own_device(other.compiles))
    changes: list[Change] = []
    for key in (k for k in ours if k in theirs):
        a, b = ours[key], theirs[key]
        for kind, value in _PER_GRAPH:
            if kind is ChangeKind.COLLECTIVE_SCHEDULE and _collectives(a) != _collectives(b):
                continue  # the graphs issue other collectives: said once, as COLLECTIVES
            if kind is ChangeKind.RUNTIME_ESTIMATE and not _slower(a, b):
                continue  # estimates differ a little with every compile
            before, after = value(a), value(b)
            if before is not None and after is not None and before != after:
                changes.append(Change(kind, Direction.CHANGED, key, before, after, _CAUSES[kind]))
    return (*changes, *_execution_order(reference, other, ours, theirs))


def _execution_order(reference: Session, other: Session, ours: dict[str, Compile],
                     theirs: dict[str, Compile]) -> tuple[Change, ...]:
    """The first place the two ranks' orders of graph runs differ, each run named by its graph's key."""
    if not reference.graph_execution or not other.graph_execution:
        return ()
    a, b = _runs(reference.graph_execution, ours), _runs(other.graph_execution, theirs)
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    if at == len(a) == len(b):
        return ()
    kind = ChangeKind.EXECUTION_ORDER
    return (Change(kind, Direction.CHANGED, f"graph run {at + 1} (of {len(a)} and {len(b)})",
                   a[at] if at < len(a) else "(no more runs)", b[at] if at < len(b) else "(no more runs)",
                   _CAUSES[kind]),)


def _runs(order: tuple[CompileId, ...], graphs: dict[str, Compile]) -> list[str]:
    key_of = {c.compile_id: key for key, c in graphs.items()}
    return [key_of.get(cid, f"graph {cid}") for cid in order]


def consequences(changes: Iterable[Change]) -> list[tuple[ChangeKind, str, str]]:
    """What `changes` lead to in a job (the kind of change, the consequence, its fix), the most likely first."""
    changes = list(changes)
    kinds = {c.kind for c in changes}
    found = [(kind, *said) for kind, said in _CONSEQUENCES.items() if kind in kinds]
    schedules = [c for c in changes if c.kind is ChangeKind.COLLECTIVE_SCHEDULE]
    if schedules and all(_waits_moved_only(c) for c in schedules):
        found = [(kind, _WAITS_MOVED if kind is ChangeKind.COLLECTIVE_SCHEDULE else text, fix)
                 for kind, text, fix in found]
    return found


_WAITS_MOVED = ("the collectives are issued in the same order on every rank, only their waits moved: they still pair "
                "up, but each rank overlaps communication with compute differently (one rank waits longer: a "
                "straggler, and its timings are not the others')")


def _waits_moved_only(change: Change) -> bool:
    def issued(schedule: str) -> list[str]:
        return [k for k in schedule.split(", ") if k != _WAIT]

    return issued(change.before) == issued(change.after)


_WAIT = "wait_tensor"


_PARITY = ("Inductor's output code for this graph does not call the collectives its scheduler placed, in that "
           "order: a bug in Inductor's code generation (file it with the graph's output code); the ranks issue "
           "collectives the schedule does not show, so every cross-rank comparison of schedules misleads here")


def parity_gaps(label: str, session: Session) -> tuple[ParityGap, ...]:
    return tuple(ParityGap(label, key, c.collective_schedule, c.code_collectives, _PARITY)
                 for key, c in _graphs(session.compiles).items()
                 if c.collective_schedule and c.code_collectives and c.collective_schedule != c.code_collectives)


def _graphs(compiles: Iterable[Compile]) -> dict[str, Compile]:
    seen: dict[str, int] = {}
    graphs = {}
    for c in sorted(compiles, key=lambda c: c.compile_id):
        where = place(c.function, c.file, c.line)
        n = seen[where] = seen.get(where, -1) + 1
        graphs[f"{where} graph {n}"] = c
    return graphs


_DEVICE = re.compile(r"\b(cuda|xpu|hpu|mps|mtia|npu|privateuseone):(\d+)\b")
OWN_DEVICE = "own"  # `cuda:own`: the device this rank runs on, whatever its index


def _on_own_device(compiles: Iterable[Compile]) -> list[Compile]:
    """`compiles` with the rank's own accelerator (the index its graphs' inputs use most, per device type) named
    `cuda:own`: each rank of a job runs on its own device, so cuda:0 on rank 0 and cuda:1 on rank 1 are the same
    input; a tensor on another device than the rank's own still shows its index."""
    compiles = list(compiles)
    used = Counter(m.groups() for c in compiles for text in c.inputs for m in _DEVICE.finditer(text))
    own: dict[str, str] = {}
    for (kind, index), _ in used.most_common():
        own.setdefault(kind, index)
    if not own:
        return compiles

    def named(m: re.Match[str]) -> str:
        return f"{m[1]}:{OWN_DEVICE}" if own.get(m[1]) == m[2] else m[0]

    return [replace(c, inputs=tuple(_DEVICE.sub(named, text) for text in c.inputs)) for c in compiles]


def _inputs(c: Compile) -> str | None:
    return ", ".join(_SYMBOL.sub(r"\1?", i) for i in c.inputs) if c.inputs else None


def _collectives(c: Compile) -> str | None:
    return ", ".join(c.collectives) or "none" if c.status == "ok" else None


def _schedule(c: Compile) -> str | None:
    return ", ".join(c.collective_schedule) if c.collective_schedule else None


def _outputs(c: Compile) -> str | None:
    """The collectives' output tensors; None where torch logged none of them (`all_reduce_: -`, an in-place
    collective): their count is COLLECTIVES', and two unknowns compared say nothing."""
    if not any(not out.endswith(": -") for out in c.collective_outputs):
        return None
    return "; ".join(c.collective_outputs)


RUNTIME_RATIO = 1.5
RUNTIME_FLOOR_NS = 1e6  # a graph whose estimate is under a millisecond on both ranks cannot make a straggler


def _runtime(c: Compile) -> str | None:
    return _ns(c.estimated_runtime_ns) if c.estimated_runtime_ns else None


def _ns(value: float) -> str:
    return f"{value / 1e6:.3g} ms" if value >= 1e5 else f"{value / 1e3:.3g} us"


def _slower(a: Compile, b: Compile) -> bool:
    x, y = a.estimated_runtime_ns or 0.0, b.estimated_runtime_ns or 0.0
    return x > 0 and y > 0 and max(x, y) >= RUNTIME_FLOOR_NS and max(x, y) > RUNTIME_RATIO * min(x, y)


def _cache(c: Compile) -> str | None:
    if not c.cache_hits and not c.cache_misses:
        return None
    return ("hit" if not c.cache_misses else "miss" if not c.cache_hits
            else f"{c.cache_hits} hit(s), {c.cache_misses} miss(es)")


_PER_GRAPH = ((ChangeKind.GRAPH_INPUTS, _inputs), (ChangeKind.COLLECTIVES, _collectives), (ChangeKind.CACHE, _cache),
              (ChangeKind.COLLECTIVE_SCHEDULE, _schedule), (ChangeKind.COLLECTIVE_OUTPUTS, _outputs),
              (ChangeKind.RUNTIME_ESTIMATE, _runtime))

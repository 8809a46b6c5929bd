"""The first collective where the ranks of a job part, from each rank's record of the collectives it issued
(torch's Flight Recorder, `model.collectives`).

Contract: `first_parting(processes) -> CollectiveParting | None`. Collectives pair up across ranks by their
sequence number in their process group, as the backend pairs them: the n-th collective of a group on one rank
with the n-th on every other. The ranks part at the first number where a rank issued another op, or tensors of
other sizes or dtypes, or nothing (it issued fewer); calls that agree in op and tensors pair up even when a
rank-dependent branch issued them (NCCL pairs them too), so the parting is where the pairing fails. Only the
numbers every rank still holds are compared (a recorder whose ring buffer wrapped lost its oldest calls), and
only ranks that left a record. `pending(record)` is a rank's first call not completed: what it waits in.
"""

from __future__ import annotations

from collections.abc import Iterable

from pt2doctor.model.collectives import CollectiveCall, CollectiveParting, RankCall, RankCollectives
from pt2doctor.model.job import ProcessSession


def first_parting(processes: Iterable[ProcessSession]) -> CollectiveParting | None:
    recorded = [(p.label, p.collectives) for p in processes if p.collectives is not None]
    if len(recorded) < 2:
        return None
    groups = sorted({c.group for _, record in recorded for c in record.calls}, key=lambda g: (g != "0", g))
    partings = [p for p in (_parting(group, recorded) for group in groups) if p is not None]
    return partings[0] if partings else None


def _parting(group: str, recorded: list[tuple[str, RankCollectives]]) -> CollectiveParting | None:
    by_rank = [(label, {c.seq: c for c in record.calls if c.group == group}, record) for label, record in recorded]
    seqs = [s for _, calls, _ in by_rank for s in calls]
    if not seqs:
        return None
    first = max((min(calls) for _, calls, record in by_rank if record.dropped and calls), default=min(seqs))
    for seq in range(first, max(seqs) + 1):
        here = [calls.get(seq) for _, calls, _ in by_rank]
        if all(c is not None for c in here) and len({c.signature for c in here if c is not None}) == 1:
            continue
        calls = tuple(RankCall(label, calls.get(seq), len(calls), None if seq in calls else _last(calls))
                      for label, calls, _ in by_rank)
        return CollectiveParting(group, seq, calls, *_detail(calls))
    return None


def _last(calls: dict[int, CollectiveCall]) -> CollectiveCall | None:
    return calls[max(calls)] if calls else None


_SAME_COUNT = ("issue the same collectives in the same order on every rank: no rank-dependent branch or loop count "
               "around a collective, eager or compiled")


def _detail(calls: tuple[RankCall, ...]) -> tuple[str, str]:
    """What happened at the parting, and its fix."""
    issued = [c.call for c in calls if c.call is not None]
    if len(issued) < len(calls):
        missing = ", ".join(c.label for c in calls if c.call is None)
        return (f"{missing} issued no collective at this number: the others wait in it for a peer that never joins "
                "(a hang until the collective's timeout)", _SAME_COUNT)
    if len({c.op for c in issued}) > 1:
        what = "; ".join(f"{c.label}: {_kind(c.call)}" for c in calls if c.call is not None)
        return (f"the ranks issued different collectives at this number ({what}), and the backend pairs these "
                "different collectives anyway (a hang, an error, or the wrong data): a rank-dependent branch chose "
                "another collective here, or a rank issued more or fewer collectives before this one", _SAME_COUNT)
    return ("the ranks issued this collective with tensors of other sizes or dtypes (a hang, an error, or a reduction "
            "over mismatched data)", "give every rank tensors of the same shape here (pad the short batch or shard, "
            "or drop_last=True)")


def _kind(call: CollectiveCall) -> str:
    """`all_reduce of Float[1024]`: what one rank issued, as the ranks must agree on it."""
    tensors = ", ".join(f"{dtype}{list(size)}" for size, dtype in zip(call.input_sizes, call.dtypes))
    return f"{call.op} of {tensors}" if tensors else call.op


def unrecorded(processes: Iterable[ProcessSession], hung: bool = False) -> tuple[str, ...]:
    """The ranks that left no record of their collectives where others did (a rank that died of a signal: gloo
    aborts one that receives a collective of another size), or, in a job that `hung` (stopped at a timeout),
    every rank without one: there the record is what names the parting, and its absence must be said."""
    ranks = [p for p in processes if p.rank is not None]
    if len(ranks) < 2 or not (hung or any(p.collectives is not None for p in ranks)):
        return ()
    return tuple(p.label for p in ranks if p.collectives is None)


def pending(record: RankCollectives | None) -> CollectiveCall | None:
    """The first collective the rank issued and had not completed when it was recorded."""
    if record is None:
        return None
    return next((c for c in record.calls if c.state != "completed"), None)

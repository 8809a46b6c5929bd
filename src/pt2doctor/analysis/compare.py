"""Compare two sessions, and hold one against a budget or a baseline.

Contract:
- `compare(a, b, labels) -> Comparison`: every difference that matters between two runs of a program
  (or two ranks of one job), keyed so that the same thing on both sides is one entry: a frame by its
  function and place, a graph break by its place and kind, a recompiled function by its place, a
  failure by its category and exception. A session compared with itself has no changes; compile
  times count only when they differ by `TIME_NOISE` (two runs of one program never take the same time).
- `over_budget(session, budget)`: the budgets `session` exceeds, with the breaks, recompiles or frames
  that make up each count.
- `new_since(baseline, session)`: graph breaks and recompiles that `session` has and `baseline` did not,
  as overruns (a CI gate fails on them).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from pt2doctor.analysis.failures import explain_failure
from pt2doctor.analysis.recompiles import pretty_function, recompile_chains
from pt2doctor.model import Session
from pt2doctor.model.compare import Budget, Change, ChangeKind, Comparison, Direction, Overrun


@dataclass(frozen=True, slots=True)
class TimeNoise:
    """A compile time changed when it moved by more than both bounds: `seconds`, and `ratio` of the larger."""

    seconds: float = 0.5
    ratio: float = 0.3

    def changed(self, before: float, after: float) -> bool:
        delta = abs(after - before)
        return delta > self.seconds and delta > self.ratio * max(before, after)


TIME_NOISE = TimeNoise()


def compare(a: Session, b: Session, labels: tuple[str, str] = ("A", "B")) -> Comparison:
    changes: list[Change] = []
    # an unknown version (a run stopped before torch said it, at a job's timeout) is no change of torch
    if a.torch_version and b.torch_version and a.torch_version != b.torch_version:
        changes.append(Change(ChangeKind.TORCH, Direction.CHANGED, "torch", a.torch_version or "?",
                              b.torch_version or "?"))
    for kind, facts in ((ChangeKind.FAILURE, _failures), (ChangeKind.GRAPH_BREAK, _breaks),
                        (ChangeKind.RECOMPILE, _recompiles), (ChangeKind.FRAME, _frames),
                        (ChangeKind.CACHE, _cache), (ChangeKind.ACCURACY, _accuracy)):
        changes += _diff(kind, facts(a), facts(b))
    changes += _compile_times(a, b)
    return Comparison(labels[0], labels[1], tuple(changes))


Fact = tuple[str, str]  # (value shown, cause in words), keyed by subject


def _diff(kind: ChangeKind, before: dict[str, Fact], after: dict[str, Fact]) -> Iterator[Change]:
    for subject in dict.fromkeys([*before, *after]):
        old, new = before.get(subject), after.get(subject)
        if old is None and new is not None:
            yield Change(kind, Direction.ADDED, subject, "", new[0], new[1])
        elif new is None and old is not None:
            yield Change(kind, Direction.REMOVED, subject, old[0], "", old[1])
        elif old is not None and new is not None and old[0] != new[0]:
            yield Change(kind, Direction.CHANGED, subject, old[0], new[0], new[1] or old[1])


def place(function: str, file: str, line: int) -> str:
    return f"{pretty_function(function)} ({file}:{line})"


def _failures(s: Session) -> dict[str, Fact]:
    facts: dict[str, Fact] = {}
    for explained in map(explain_failure, s.failures):
        f = explained.failure
        facts[f"{f.category.value}: {f.exception.rsplit('.', 1)[-1]}"] = (explained.root, explained.root)
    return facts


def _breaks(s: Session) -> dict[str, Fact]:
    return {f"{b.file}:{b.line} ({b.break_type or b.reason.splitlines()[0]})":
            (f"{b.count}x", b.explanation or b.reason.splitlines()[0]) for b in s.graph_breaks}


def _recompiles(s: Session) -> dict[str, Fact]:
    return {place: (f"{n}x" + (" + limit hit" if limit else ""), causes)
            for place, (n, limit, causes) in _recompiled(s).items()}


def _recompiled(s: Session) -> dict[str, tuple[int, bool, str]]:
    """Per recompiled function: how many recompiles, whether it hit the limit, and their causes in words."""
    counts = {}
    for chain in recompile_chains(s):
        causes = dict.fromkeys(step.cause_words for step in chain.steps if step.cause_words)
        counts[place(chain.function, chain.file, chain.line)] = (len(chain.steps), chain.limit_hit is not None,
                                                                   "; ".join(causes))
    return counts


def _frames(s: Session) -> dict[str, Fact]:
    graphs: Counter[str] = Counter()
    ops: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    for c in s.compiles:
        key = place(c.function, c.file, c.line)
        graphs[key] += c.status == "ok"
        ops[key] += c.ops or 0 if c.status == "ok" else 0
        failed[key] += c.status == "failed"
    return {key: (f"{graphs[key]} graph(s), {ops[key]} ops" + (f", {failed[key]} failed" if failed[key] else ""), "")
            for key in graphs}


def _cache(s: Session) -> dict[str, Fact]:
    hits, misses = sum(c.cache_hits for c in s.compiles), sum(c.cache_misses for c in s.compiles)
    return {"compile caches": (f"{hits} hit(s), {misses} miss(es)", "")} if hits or misses else {}


def _accuracy(s: Session) -> dict[str, Fact]:
    return {f"graph {g.graph}": (g.verdict, "") for g in s.accuracy}


def _compile_times(a: Session, b: Session) -> Iterator[Change]:
    def per_frame(s: Session) -> dict[str, float]:
        times: dict[str, float] = {}
        for c in s.compiles:
            key = place(c.function, c.file, c.line)
            times[key] = times.get(key, 0.0) + (c.time_s or 0.0)
        return times

    before, after = per_frame(a), per_frame(b)
    totals = ("total", a.compile_time_s, b.compile_time_s)
    for subject, old, new in (totals, *((k, before[k], after[k]) for k in before if k in after)):
        if TIME_NOISE.changed(old, new):
            yield Change(ChangeKind.COMPILE_TIME, Direction.CHANGED, subject, f"{old:.2f} s", f"{new:.2f} s")


def over_budget(session: Session, budget: Budget) -> tuple[Overrun, ...]:
    measured: tuple[tuple[str, float | None, float, Callable[[], Iterable[str]]], ...] = (
        ("graph_breaks", budget.graph_breaks, session.graph_break_count,
         lambda: (f"{b.file}:{b.line}: {b.reason.splitlines()[0]} ({b.count}x)" for b in session.graph_breaks)),
        ("recompiles", budget.recompiles, len(session.recompiles),
         lambda: (f"{chain.title}: {chain.steps[0].cause_words}" if chain.steps and chain.steps[0].cause_words
                  else chain.title
                  for chain in recompile_chains(session))),
        ("compile_time_s", budget.compile_time_s, round(session.compile_time_s, 3),
         lambda: (f"{c.compile_id} {pretty_function(c.function)}: {c.time_s or 0.0:.2f} s"
                  for c in sorted(session.compiles, key=lambda c: -(c.time_s or 0.0))[:5])),
    )
    return tuple(Overrun(what, limit, actual, tuple(evidence())) for what, limit, actual, evidence in measured
                 if limit is not None and actual > limit)


def new_since(baseline: Session, session: Session) -> tuple[Overrun, ...]:
    """Graph breaks and recompiles that `session` has and `baseline` does not (more recompiles of a
    function than the baseline had count as new)."""
    known = _breaks(baseline)
    found = [Overrun("new graph break", 0, 1, (f"{place}: {reason}",))
             for place, (_count, reason) in _breaks(session).items() if place not in known]
    before = _recompiled(baseline)
    for place, (n, _limit, causes) in _recompiled(session).items():
        if n > before.get(place, (0, False, ""))[0]:
            found.append(Overrun("new recompile", before.get(place, (0, False, ""))[0], n, (f"{place}: {causes}",)))
    return tuple(found)

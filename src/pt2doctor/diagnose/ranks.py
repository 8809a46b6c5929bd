"""Diagnosing a job (`diagnose --nproc-per-node N`, `diagnose -- torchrun ...`): which rank is diagnosed, and
whether its failing graph can be reproduced in one process.

Contract: every run of a job's diagnosis is a torchrun run that stands for the rank whose failure ended first
(`diagnose.runs`); the stage ladder and the recording are that rank's. `name_rank(found, job, attempts)` records
the rank, how many ranks ran, and what the other ranks did (their failures usually follow from the first: a peer
that closed its connection). `collectives_of_failing_graph(run_dir, graph_id, session)` are the collectives the
graph to be minified issues (from the rank's own trace, `Compile.collectives`): a graph that issues none is
minified and verified in a single process like any other; one that does needs a process group of several ranks,
which a standalone repro does not have, so it is not minified and the diagnosis says so.
"""

from __future__ import annotations

from pathlib import Path

from pt2doctor.capture.process_meta import RunPaths
from pt2doctor.diagnose.found import Found
from pt2doctor.model import Session
from pt2doctor.model.diagnosis import Attempt
from pt2doctor.model.job import FirstRank, Job
from pt2doctor.model.recording import read_index
from pt2doctor.model.serialize import RecordError


def name_rank(found: Found, job: Job | None, attempt: Attempt, again: Attempt | None) -> None:
    """`attempt` (the reproduction diagnosed) stands for one rank of `job`: say which, and what the others did."""
    if attempt.rank is None or job is None:
        return
    found.rank = FirstRank(attempt.rank, len(job.processes))
    others = [f"{p.label} {_ended(p.session)}" for p in job.processes if p.label != attempt.rank]
    found.notes.append(f"{attempt.rank} of {len(job.processes)} failed first; its failure is the one diagnosed, from "
                       f"its own trace and recorded graphs (the others: {'; '.join(others) or 'none'})")
    if again is not None and again.rank is not None and again.rank != attempt.rank and again.outcome == "fail":
        found.notes.append(f"in the second reproduction {again.rank} failed first, not {attempt.rank}: the ranks "
                           "race to fail, and any of them can show it")


def _ended(session: Session) -> str:
    if not session.failures:
        return "passed" if session.exit.ok else "was stopped when the job ended"
    f = session.failures[0]
    line = (f.message.splitlines() or [""])[0]
    return f"then failed: {f.exception.rsplit('.', 1)[-1]}: {line[:160]}{'...' if len(line) > 160 else ''}"


def collectives_of_failing_graph(run_dir: Path, graph_id: str, session: Session | None) -> tuple[str, ...]:
    """The collectives that the Dynamo graph behind recorded graph `graph_id` issues, in order."""
    try:
        entries = {e.id: e for e in read_index(RunPaths(run_dir).graphs_dir)}
    except RecordError:
        return ()
    entry = entries.get(graph_id)
    while entry is not None and entry.compile_id is None and entry.parent is not None:
        entry = entries.get(entry.parent)
    if entry is None or entry.compile_id is None or session is None:
        return ()
    return next((c.collectives for c in session.compiles if str(c.compile_id.compile) == entry.compile_id), ())


def needs_ranks(found: Found, graph_id: str, collectives: tuple[str, ...]) -> bool:
    """True (and said in the notes) when the failing graph of a job cannot be reproduced in one process."""
    if found.rank is None:
        return False
    rank = found.rank.label
    if collectives:
        found.notes.append(f"not minified: {rank}'s failing graph ({graph_id}) issues {', '.join(collectives)}, so a "
                           f"repro needs a process group of {found.rank.ranks} ranks, which a standalone repro.py does "
                           "not have; run the job again with `pt2doctor diagnose` after changing it, or file the job's "
                           "script")
        return True
    found.notes.append(f"{rank}'s failing graph ({graph_id}) issues no collective: repro.py reproduces it in a single "
                       "process, without torchrun")
    return False

"""Two runs of one job, rank by rank: `compare_jobs(a, b, labels) -> JobComparison`.

Contract: processes are paired by their label (`rank 1` with `rank 1`), and each pair is compared as two runs
of one process are (`analysis.compare.compare`: frames, breaks, recompiles, failures, compile time, caches);
a process only one job has is listed as such. A job compared with itself has no changes.
"""

from __future__ import annotations

from pt2doctor.analysis.compare import compare
from pt2doctor.model.job import Job, JobComparison, RankChanges


def compare_jobs(a: Job, b: Job, labels: tuple[str, str] = ("A", "B")) -> JobComparison:
    theirs = {p.label: p for p in b.processes}
    ours = {p.label for p in a.processes}
    ranks = tuple(RankChanges(p.label, compare(p.session, theirs[p.label].session,
                                               (f"{labels[0]} {p.label}", f"{labels[1]} {p.label}")))
                  for p in a.processes if p.label in theirs)
    return JobComparison(labels[0], labels[1], ranks, tuple(p.label for p in a.processes if p.label not in theirs),
                         tuple(p.label for p in b.processes if p.label not in ours))

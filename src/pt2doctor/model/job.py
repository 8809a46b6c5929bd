"""A program that ran as several processes (the ranks of a `torchrun` job, `multiprocessing.spawn`
workers): one `Session` per process, never merged, and how each rank departs from the reference rank.

`JOB_SCHEMA` names the version of the document `pt2doctor run --nproc-per-node` writes as session.json
(and `report --json` prints for a trace of several processes): `{schema, command, exit, processes:
[{label, rank, pid, session, collectives}], divergence, at_timeout, first_failure, parity, compiled_little,
parting}`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pt2doctor.model.collectives import CollectiveCall, CollectiveParting, RankCollectives
from pt2doctor.model.compare import Comparison
from pt2doctor.model.ids import SourceLoc
from pt2doctor.model.session import ExitInfo, Session

JOB_SCHEMA = "pt2doctor.job/1"


@dataclass(frozen=True, slots=True)
class FirstRank:
    """The rank of a job whose failure ended first (`rank 1`): the one `diagnose` diagnoses, of `ranks` that ran."""

    label: str
    ranks: int


@dataclass(frozen=True, slots=True)
class ProcessSession:
    label: str  # `rank 3`, or `pid 4242` for a process that is not a rank
    rank: int | None
    pid: int | None
    session: Session
    ended_at: float | None = None  # when the process ended (time.time()), where its sidecar says
    collectives: RankCollectives | None = None  # the collectives it issued (torch's Flight Recorder), where recorded


@dataclass(frozen=True, slots=True)
class RankDivergence:
    """One process against the reference (the lowest rank): what differs, and what it leads to."""

    label: str
    comparison: Comparison
    consequence: str = ""  # the most likely thing the difference leads to (the collectives that no longer pair up)
    fix: str = ""  # what to change for it
    more: tuple[str, ...] = ()  # the other things it may lead to, less likely (the HTML report lists them)


@dataclass(frozen=True, slots=True)
class ParityGap:
    """One graph of one process whose output code calls other collectives, or in another order, than
    Inductor's scheduler placed (tlparse's collective parity): a bug in Inductor's code generation."""

    label: str  # the process
    graph: str  # `f (train.py:3) graph 0`
    scheduled: tuple[str, ...]
    in_code: tuple[str, ...]
    detail: str  # what it means and leads to


@dataclass(frozen=True, slots=True)
class CompiledLittle:
    """A process that compiled nothing, or far less than it ran (`analysis.coverage`): it ran eagerly."""

    label: str
    detail: str  # `nothing was compiled: 4 frame(s) ... DistributedDataParallel's forward graph-breaks (...)`


WaitState = Literal["collective", "compiling", "graph", "user code", "ended", "unknown"]


@dataclass(frozen=True, slots=True)
class RankAtTimeout:
    """Where one rank was when a job was stopped at its timeout (from its stack, dumped just before)."""

    label: str
    state: WaitState
    detail: str  # the collective (`all_reduce`), the compiler step, or the user's line
    where: SourceLoc | None = None  # the user's innermost line
    pending: CollectiveCall | None = None  # the collective it had issued and was waiting in, where recorded


@dataclass(frozen=True, slots=True)
class Job:
    schema: str  # JOB_SCHEMA
    command: tuple[str, ...]
    exit: ExitInfo
    processes: tuple[ProcessSession, ...]
    divergence: tuple[RankDivergence, ...] = ()
    at_timeout: tuple[RankAtTimeout, ...] = ()  # a job stopped at --timeout: every rank's place
    first_failure: str | None = None  # the process whose failure ended first (the others' often follow from it)
    parity: tuple[ParityGap, ...] = ()  # graphs whose output code's collectives are not the scheduler's
    compiled_little: tuple[CompiledLittle, ...] = ()  # processes that ran (mostly) eagerly
    parting: CollectiveParting | None = None  # the first collective the ranks did not issue alike
    unrecorded: tuple[str, ...] = ()  # ranks without a record of their collectives where others had one, or in a hang


@dataclass(frozen=True, slots=True)
class RankChanges:
    label: str  # `rank 1`
    comparison: Comparison


@dataclass(frozen=True, slots=True)
class JobComparison:
    """Two runs of one job (before and after a change), rank by rank (`pt2doctor compare JOB_A JOB_B`)."""

    before: str
    after: str
    ranks: tuple[RankChanges, ...]  # one per process both jobs have
    only_before: tuple[str, ...] = ()  # processes only the first job has
    only_after: tuple[str, ...] = ()

    @property
    def same(self) -> bool:
        return not self.only_before and not self.only_after and all(r.comparison.same for r in self.ranks)

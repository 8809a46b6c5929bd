"""What `diagnose` has established that every step reads: the verdict, the runs, the repro in hand.

Contract: `Found` is mutable while the procedure (`diagnose.procedure`) runs and is frozen into a
`Diagnosis` after every step and at the end (`freeze`, with the exit code and what the steps returned for the report
alone: `diagnose.reported.Reported`, the owner's hand-over, replay.py, where to look, other releases); `timed(step)`
adds a step's seconds to `timings`. It holds no words: how it ended is `ending` (`diagnose.endings`), and the headline
and next steps are said from the facts as they stand each time it is frozen (`diagnose.conclusions.said`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields

from pt2doctor.diagnose.conclusions import said
from pt2doctor.diagnose.endings import Ending, GpuHeld
from pt2doctor.diagnose.reported import Reported
from pt2doctor.diagnose.stopping import BUDGET
from pt2doctor.model import Category, Environment, Session, SourceLoc
from pt2doctor.model.category_policy import policy
from pt2doctor.model.diagnosis import Attempt, Diagnosis, FailingStage, ProgramRepro, RunLedger, ShortForm, StageOutcome
from pt2doctor.model.exit_codes import ExitCode
from pt2doctor.model.minify import BackendKind, MinifyResult, source_calls


@dataclass
class Found:
    """What the procedure has established so far; frozen into a `Diagnosis` at the end."""

    command: tuple[str, ...]
    category: Category | None = None
    stage: FailingStage | None = None
    stages: dict[str, StageOutcome] = field(default_factory=dict)
    flaky: bool = False
    set_aside: bool = False  # the first failure did not repeat: what was drawn from it is not handed over
    attempts: list[Attempt] = field(default_factory=list)
    ending: Ending | None = None  # how it concluded (`diagnose.endings`): None while it goes on
    error: str = ""
    hint: str = ""
    original_backend: str | None = None
    user_frames: list[SourceLoc] = field(default_factory=list)
    minify: MinifyResult | None = None
    program: ProgramRepro | None = None  # the program reduced (`reduce.program`)
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    stopped_by: str = ""  # what stopped it early: a signal's name (SIGINT: Ctrl-C) or "budget" (`diagnose.stopping`)
    recording_changed_outcome: bool = False  # the recorded run failed otherwise than the plain runs
    backend_kind: BackendKind | None = None  # how the recording could carry the script's backend
    session: Session | None = None
    torchrun: tuple[str, ...] | None = None  # the script runs as a job, through torchrun with these flags
    rank: str | None = None  # a job: the rank diagnosed (the first whose failure ended)
    ranks: int | None = None  # a job: how many ranks ran
    short: ShortForm | None = None  # repro.py in PyTorch's idiom, verified (`diagnose.short_repro`)
    harness_test: str | None = None  # test_repro.py of the harness form, where no short form reproduced
    _timing: set[str] = field(default_factory=set, repr=False)  # the steps being timed now
    internal_errors: list[str] = field(default_factory=list)  # steps that raised: pt2doctor's own errors

    @contextmanager
    def timed(self, step: str) -> Iterator[None]:
        """Add the seconds inside to `timings[step]`; inside a `timed` of the same step (a step of the procedure
        and the function it calls) they are counted once."""
        if step in self._timing:
            yield
            return
        started = time.monotonic()
        self._timing.add(step)
        try:
            yield
        finally:
            self._timing.discard(step)
            self.took(step, time.monotonic() - started)

    def took(self, step: str, seconds: float) -> None:
        """Add `seconds` to `timings[step]`: work timed where it ran, on another thread (the bisection)."""
        self.timings[step] = round(self.timings.get(step, 0.0) + seconds, 3)

    def chosen_repro(self) -> MinifyResult | ProgramRepro | None:
        """The repro that stands for the failure as repro.py: the graph's when it verified (or there is no
        reduced program), else the reduced program."""
        m, p = self.minify, self.program
        return p if p is not None and not (m is not None and m.verified) else m

    def restart_from_plain_runs(self) -> None:
        """Recording the graphs changed how the program ends (`diagnose.reproduce.repeated`): what the steps found
        from the recording is set aside, the runs made and their evidence are kept, and the procedure runs again
        from `classify` on the plain runs."""
        kept = {"command", "attempts", "notes", "timings", "torchrun", "stopped_by", "internal_errors", "session",
                "recording_changed_outcome", "_timing"}
        fresh = Found(command=self.command)
        for f in fields(self):
            if f.name not in kept:
                setattr(self, f.name, getattr(fresh, f.name))

    @property
    def interrupted(self) -> bool:
        """Stopped by a signal (not by its budget, after which it hands over what it found as a conclusion)."""
        return self.stopped_by not in ("", BUDGET)

    def freeze(self, runs: RunLedger | None = None, pending: tuple[str, ...] = (),
               reported: Reported | None = None) -> Diagnosis:
        """The verdict as a value; `runs`: what it cost (`diagnose.ledger`); `pending`: the steps still to come,
        when it is written before the end; `reported`: what the steps returned for the report."""
        m, p = self.minify, self.program
        environment = self.session.environment if self.session else Environment()
        chosen = self.chosen_repro()
        graph = m is not None and chosen is m
        short = self.short if graph else None
        if graph:  # test_repro.py beside repro.py: the short form's, else the harness form's own check
            test = short.test if short else self.harness_test
        else:
            test = p.test if p is not None and chosen is p else None
        repro, verified = (short.repro if short else chosen.repro_path, chosen.verified) if chosen else (None, False)
        ops = self.culprit_ops()
        r = reported or Reported()
        b = r.hand_over.bisection
        words = said(self, r, pending)
        return Diagnosis(
            command=self.command, category=self.category, stage=self.stage, stages=dict(self.stages),  # type: ignore[arg-type]
            subsystem=b.subsystem if b else None, flaky=self.flaky,
            repro=repro, repro_verified=verified, repro_runs=chosen.verify_runs if chosen else None,
            replay=r.replay.path if r.replay else None, replay_verified=bool(r.replay and r.replay.verified),
            minified_nodes=m.nodes_after if m and graph else None, culprit_ops=ops,
            culprit_sources=source_calls(m.origins) if m and graph else (),
            input_needs=m.input_needs if m and graph else (), short=short, test=test,
            user_frames=tuple(self.user_frames), headline=words.headline, error=self.error, hint=self.hint,
            original_backend=self.original_backend, attempts=tuple(self.attempts), bisection=b,
            settings=r.hand_over.settings,
            minify=m, program=p, next_steps=words.next_steps, notes=(*self.notes, *words.notes),
            timings=dict(self.timings),
            environment=environment, interrupted=self.interrupted, exit_code=_exit_code(self), export=r.export,
            torchrun=self.torchrun, rank=self.rank, ranks=self.ranks, control=r.control,
            workarounds=r.workarounds, where_to_look=r.where_to_look, runtime=r.runtime,
            needs_compiler=r.needs_compiler, versions=r.upgrade.versions if r.upgrade else None, runs=runs,
            pending=pending, stopped_by=self.stopped_by,
        )

    def culprit_ops(self) -> tuple[str, ...]:
        """The ops repro.py blames: the minimal graph's culprits (else all its ops) when the graph is repro.py,
        else the reduced program's culprit calls."""
        m, p, chosen = self.minify, self.program, self.chosen_repro()
        if m is not None and chosen is m:
            return m.culprit_ops or m.ops
        return p.culprit_ops if p is not None else ()


_STOPPED_EXIT = {"SIGINT": ExitCode.INTERRUPTED, "SIGTERM": ExitCode.TERMINATED, "SIGHUP": ExitCode.HUNG_UP}


def _exit_code(found: Found) -> int:
    if found.interrupted:  # as a shell reports a command a signal stopped: 128 + N
        return _STOPPED_EXIT.get(found.stopped_by, ExitCode.INTERRUPTED)
    if found.internal_errors:
        return ExitCode.INTERNAL
    if isinstance(found.ending, GpuHeld):
        return ExitCode.GPU_HELD
    if found.category is None:  # nothing failed; or the budget ran out before anything did: not known
        return ExitCode.TIMEOUT if found.stopped_by == BUDGET else ExitCode.OK
    if found.flaky:
        return ExitCode.FLAKY
    return policy(found.category).exit_code

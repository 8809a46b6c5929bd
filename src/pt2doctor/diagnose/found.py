"""What `diagnose` has established that every step reads: the verdict, the runs, the repro in hand.

Contract: `Found` is mutable while the procedure (`diagnose.procedure`) runs and is frozen into a
`Diagnosis` after every step and at the end (`diagnose.frozen.freeze`); `timed(step)` adds a step's seconds to
`timings`. It holds no words: how it ended is `ending` (`diagnose.endings`), and the headline and next steps are said
from the facts as they stand each time it is frozen (`diagnose.conclusions.said`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields

from pt2doctor.diagnose.endings import Ending
from pt2doctor.diagnose.stopping import BUDGET
from pt2doctor.model import Category, Session, SourceLoc
from pt2doctor.model.diagnosis import Attempt, FailingStage, ProgramRepro, ShortForm, StageOutcome
from pt2doctor.model.job import FirstRank
from pt2doctor.model.minify import BackendSpec, MinifyResult


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
    backend: BackendSpec | None = None  # the failing graph's backend, as the recording can carry it (`classify`)
    user_frames: list[SourceLoc] = field(default_factory=list)
    minify: MinifyResult | None = None
    program: ProgramRepro | None = None  # the program reduced (`reduce.program`)
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    stopped_by: str = ""  # what stopped it early: a signal's name (SIGINT: Ctrl-C) or "budget" (`diagnose.stopping`)
    recording_changed_outcome: bool = False  # the recorded run failed otherwise than the plain runs
    session: Session | None = None
    torchrun: tuple[str, ...] | None = None  # the script runs as a job, through torchrun with these flags
    rank: FirstRank | None = None  # a job: the rank diagnosed (the first whose failure ended), of how many
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

    @property
    def original_backend(self) -> str | None:
        """The backend's name (`inductor`, `aot_eager`, the script's own function's), where the recording saw one."""
        return self.backend.name if self.backend is not None else None

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

    def culprit_ops(self) -> tuple[str, ...]:
        """The ops repro.py blames: the minimal graph's culprits (else all its ops) when the graph is repro.py,
        else the reduced program's culprit calls."""
        m, p, chosen = self.minify, self.program, self.chosen_repro()
        if m is not None and chosen is m:
            return m.culprit_ops or m.ops
        return p.culprit_ops if p is not None else ()

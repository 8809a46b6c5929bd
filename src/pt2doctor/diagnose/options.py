"""What `pt2doctor diagnose` was asked to do, as one frozen value the procedure and its steps share."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pt2doctor.model.settings import default_jobs
from pt2doctor.versions.options import VersionsSettings

DEFAULT_PROGRAM_BUDGET_S = 240.0  # the program reducer's time: a few minutes
# The program reducer stops after this many new candidates in a row kept nothing (checked, or refused unchecked:
# `reduce.program_keep.Keep`; until session 25, checks alone). Most checks come after the last smaller
# program (13 of 584, 14 of 398: bench/results/realbugs-2026-11-26.md): the AST pass's last sweep, finding nothing.
# With 60 instead of 150, four of five program-reduced corpus bugs ended at the same size and one a line longer
# (25 -> 16 lines, was 15), in 74-200 checks instead of 164-308 (bench/results/economy-2026-11-27.md).
DEFAULT_PROGRAM_PATIENCE = 60
# ... or after this many seconds kept nothing: a check that compiles takes seconds (2 s a check on
# remainder_fp16_scalar); the longest wait between two smaller programs measured on the corpus was 16 s (45 checks
# of 0.35 s).
DEFAULT_PROGRAM_PATIENCE_S = 30.0


@dataclass(frozen=True, slots=True)
class DiagnoseOptions:
    script: Path
    args: tuple[str, ...] = ()
    out_dir: Path = Path("pt2doctor-diagnose")
    timeout_s: float | None = None
    function: str | None = None
    jobs: int = field(default_factory=default_jobs)
    query_timeout_s: float = 120.0
    # the program reducer's time (the Dynamo stage, or no verified graph repro)
    program_budget_s: float = DEFAULT_PROGRAM_BUDGET_S
    program_patience: int | None = DEFAULT_PROGRAM_PATIENCE  # candidates in a row that kept nothing; None: budget only
    program_patience_s: float | None = DEFAULT_PROGRAM_PATIENCE_S  # or seconds that kept nothing
    minify: bool = True
    bisect: bool = True
    workarounds: bool = True  # try workarounds on copies of the script (`diagnose.workarounds`)
    torchrun: tuple[str, ...] | None = None  # run the script as a job through torchrun, with these flags
    versions: VersionsSettings | None = None  # run the verified repro under other torch releases (`diagnose.upgrade`)
    budget_s: float | None = None  # the whole diagnosis's seconds: the best found is handed over when they run out
    cost: bool = False  # one more run, with compilation off, that the workarounds' cost is measured against

    def __post_init__(self) -> None:
        # absolute, so that every path written into the bundle (repro, replay, run dirs) resolves
        # from anywhere, and the steps that run in other directories find what they were given
        object.__setattr__(self, "out_dir", Path(self.out_dir).absolute())

"""What `pt2doctor diagnose` found: the runs it made, the failing stage, the bisection, the repro.

Contract: frozen, torch-free values, written as `diagnosis.json` (schema `SCHEMA`,
documented in docs/reference/diagnosis-json.md). `Attempt` is one run of the user's unchanged script under one variant
(the original backend, a reference backend, compilation off); `Diagnosis` is the whole story, with
every step's time in `timings`. A field that a step did not reach stays at its empty value, so a
diagnosis cut short (Ctrl-C, a step that failed) is still a valid document.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Literal

from pt2doctor.model.compiler_settings import SettingSearch
from pt2doctor.model.export import ExportFinding
from pt2doctor.model.ids import SourceLoc
from pt2doctor.model.minify import InputNeed, MinifyResult, NodeOrigin, VerifyRuns
from pt2doctor.model.runtime import NeedsCompiler, RuntimeTriage
from pt2doctor.model.session import Category, Environment
from pt2doctor.model.source_refs import SourceRef
from pt2doctor.model.versions import VersionsResult

SCHEMA = "pt2doctor.diagnosis/2"  # 2: `runtime.sanitizer` is an object (`SanitizerFinding`), not words

StageOutcome = Literal["pass", "fail", "skipped"]


class FailingStage(str, Enum):
    """The compiler stage a failure is blamed on: the first rung of the backend ladder that fails."""

    DYNAMO = "dynamo"
    AOT_AUTOGRAD = "aot_autograd"
    DECOMP_PARTITION = "decomp_partition"
    INDUCTOR = "inductor"
    BACKEND = "backend"


# The words for a failing stage and for `CompilerBisector`'s subsystems, shared by every renderer.
STAGE_TITLES = {
    FailingStage.DYNAMO: "Dynamo (graph capture)",
    FailingStage.AOT_AUTOGRAD: "AOTAutograd",
    FailingStage.DECOMP_PARTITION: "decompositions / partitioner",
    FailingStage.INDUCTOR: "Inductor (lowering / codegen)",
    FailingStage.BACKEND: "the custom backend",
}
SUBSYSTEM_TITLES = {
    "pre_grad_passes": "pre-grad FX passes",
    "joint_graph_passes": "joint-graph passes",
    "post_grad_passes": "post-grad passes",
    "lowerings": "a lowering (aten op -> Inductor IR)",
    "decomposition": "a decomposition",
    "cudagraphs": "CUDA graphs",
    "inductor_fallback_random": "random-number codegen (fallback_random fixes it)",
    "inductor_emulate_precision_casts": "precision casts (emulate_precision_casts fixes it)",
    "inductor_layout_optimization": "layout optimization",
    "inductor_comprehensive_padding": "comprehensive padding",
    "aot_eager_decomp_partition_cse": "CSE in the partitioner",
}
# The config a user sets to turn off what `CompilerBisector` blamed: `model.compiler_settings.for_subsystem`.


@dataclass(frozen=True, slots=True)
class Attempt:
    """One run of the script: `signature` is the normalised failure (None when it passed)."""

    label: str
    backend: str | None
    outcome: Literal["pass", "fail"]
    signature: str | None
    category: Category | None
    exit_code: int
    wall_s: float
    run_dir: str
    error: str = ""  # the one-line error as the user saw it
    rank: str | None = None  # a job's run: the rank it stands for (the first whose failure ended), `rank 1`
    step: str = ""  # the step of diagnose that made this run (`diagnose.procedure.STEPS`, or one of its parts)
    forked: bool = False  # started forked from an interpreter that had imported torch (`diagnose.forking.Forking`)
    # started ahead, at low priority, before the step that took it asked (`diagnose.runs.VariantRunner.ahead`)
    ahead: bool = False


@dataclass(frozen=True, slots=True)
class StepRuns:
    """What one step of diagnose cost in runs (issue #38: runs are the currency). `whole`: runs of the user's whole
    program, each a new interpreter or forked from one (`Attempt.forked`: the reproductions, stage runs, workaround
    copies), with their `whole_s` seconds, stopped ones too; `checks`: runs of a reduced candidate of the program in a
    warm worker (the program reducer's); `graph`: graph-level runs, of a recorded graph or of a repro pt2doctor wrote
    (the minifier's and the bisector's queries, the stage ladder on the recorded graph, verifications)."""

    step: str
    whole: int = 0
    whole_s: float = 0.0
    checks: int = 0
    graph: int = 0


@dataclass(frozen=True, slots=True)
class RunLedger:
    """Every run a diagnosis made, by step, in the order the steps ran, with the totals."""

    steps: tuple[StepRuns, ...] = ()
    whole: int = 0
    whole_s: float = 0.0
    checks: int = 0
    graph: int = 0
    caches: str = ""  # which of torch's compile caches the runs shared, in words (`diagnose.runs.SHARED_CACHES`)

    @classmethod
    def of(cls, steps: tuple[StepRuns, ...], caches: str = "") -> RunLedger:
        return cls(steps, sum(s.whole for s in steps), round(sum(s.whole_s for s in steps), 1),
                   sum(s.checks for s in steps), sum(s.graph for s in steps), caches)

    def describe(self) -> str:
        """`4 whole-program runs (reproduce 2, workarounds 2; 31.2 s of runs), 57 graph-level runs`."""
        by_step = ", ".join(f"{s.step} {s.whole}" for s in self.steps if s.whole)
        whole = f"{self.whole} whole-program run{'' if self.whole == 1 else 's'}" + (
            f" ({by_step}; {self.whole_s:.1f} s of runs)" if self.whole else "")
        checks = f", {self.checks} program checks in warm workers" if self.checks else ""
        return f"{whole}{checks}, {self.graph} graph-level run{'' if self.graph == 1 else 's'}"


@dataclass(frozen=True, slots=True)
class Bisection:
    """What `CompilerBisector` found on the minimal repro (subsystem None: the backend as a whole)."""

    backend: str | None
    subsystem: str | None
    bisect_number: int | None = None
    debug_info: str | None = None
    queries: int = 0
    time_s: float = 0.0
    note: str = ""

    def describe(self) -> str:
        """One line: the backend, the subsystem in words, which application, the bisector's detail."""
        if self.backend is None:
            return self.note or "no bisection"
        if self.subsystem is None:
            return f"{self.backend} as a whole (no pass or lowering isolates it: code generation)"
        title = SUBSYSTEM_TITLES.get(self.subsystem, self.subsystem)
        where = f", application #{self.bisect_number}" if self.bisect_number else ""
        info = f": {self.debug_info}" if self.debug_info and self.debug_info != self.subsystem else ""
        return f"{self.backend} / {title}{where}{info}"


@dataclass(frozen=True, slots=True)
class BisectJob:
    """What the bisection process (`bisect.child`) is asked: bisect `backend` on the repro at
    `repro`, which fails like `target` (a failure signature), `jobs` queries at a time, and write the
    `Bisection` it finds to `out`."""

    repro: str
    target: str
    out: str
    backend: str = "inductor"
    jobs: int = 2


@dataclass(frozen=True, slots=True)
class StateChange:
    """A statement of a reduced program that writes state its compiled code reads, between two calls of
    that code (`reduce.program_changes`): `path` is what it writes (`Model.m.__code__`,
    `model.__dict__['sub']`), `statement` the statement as written, `line` its line in the reduced program (repro.py
    below its docstring)."""

    path: str
    statement: str
    line: int


# why a program was reduced: see `ProgramRepro`
ProgramReason = Literal["dynamo", "fallback", "export", "short"]


@dataclass(frozen=True, slots=True)
class ProgramRepro:
    """repro.py as the user's program reduced (`reduce.program`): it fails compiled the way the script
    did (with `backend` forced onto every `torch.compile`; None: the script's own) and passes with
    compilation off (`passes_with` says how: on the export path, with the failing step turned off; empty
    when there is no such run, a tracing step failed). `reason` says why it was made: the stage is Dynamo
    (no graph shows the bug), graph minification gave no verified repro (`fallback`), the failure is in
    torch.export (`export`), or the minimal graph verified but has no short form in PyTorch's idiom (`short`: a
    higher-order op, functorch's private calls; the program reduced is then the short form, `diagnose.short_repro`).
    For a wrong result, `changes` are the
    statements between two calls of the compiled code that write state it reads (a stale result: no
    guard caught them); `culprit_ops` names their paths first, then the calls in compiled code. `check_s` is the mean
    seconds per check; `stopped_early` is "budget", "no_progress" (that many checks in a row kept nothing) or
    "interrupted" when the reduction did not reach its fixed point."""

    repro_path: str
    signature: str
    backend: str | None
    reason: ProgramReason
    lines_before: int
    lines_after: int
    checks: int
    check_s: float
    time_s: float
    verified: bool
    culprit_ops: tuple[str, ...] = ()
    stopped_early: str | None = None
    improved_at: tuple[int, ...] = ()  # the checks (1-based) that found a smaller program
    backend_in_source: bool = False  # repro.py's torch.compile calls name `backend`: it runs as it stands
    changes: tuple[StateChange, ...] = ()  # a stale result: what changed between compiled calls, no guard caught
    passes_with: str = ""  # the run it passes, in words ("with compilation off (...)"); empty: none
    verify_runs: VerifyRuns | None = None  # how often it failed compiled where it was verified (None: not run)
    test: str | None = None  # test_repro.py, the program as a regression test in PyTorch's idiom (verified both ways)


@dataclass(frozen=True, slots=True)
class Control:
    """A trivial program of the failing kind (one op, the same compiler and device), run on the same machine
    under the same oracle (`diagnose.control`): when it fails the same way as the script, the environment
    is at fault, not the program. `ended` says how it ended, in words; `path` is the program."""

    program: str
    path: str
    fails_the_same_way: bool
    ended: str


@dataclass(frozen=True, slots=True)
class ShortForm:
    """repro.py in PyTorch's own idiom (`diagnose.short_repro`): a function of plain torch calls, its inputs,
    `torch.compile` and `torch.testing.assert_close`, `lines` long, verified both ways in fresh interpreters
    (`runs`: how often it failed compiled). `graph` is the minifier's harness form (repro_graph.py); `test`
    the regression test in PyTorch's test idiom (test_repro.py), verified to fail now, or None."""

    repro: str
    graph: str
    lines: int
    runs: VerifyRuns
    test: str | None = None


@dataclass(frozen=True, slots=True)
class WorkaroundCost:
    """What a workaround costs. Whole runs: `seconds` the script's run with the workaround, `all_eager_s` with
    compilation off (None: not run), interpreter start and compilation included (`what`). Steady state: the
    compiled regions' time past their first calls (`CallTimes.steady_state_s`: the calls of every
    `torch.compile`'d callable, on a GPU to their kernels' end), `steady_s` with the workaround and
    `all_eager_steady_s` with compilation off; None, with `steady_note` saying why, where nothing was timed
    (a compiled callable that ran once has no steady state). Compiled as it is now is not timed: pt2doctor does
    not change the failing runs it diagnoses."""

    seconds: float
    all_eager_s: float | None
    what: str = "the whole script's run, interpreter start and compilation included"
    steady_s: float | None = None
    all_eager_steady_s: float | None = None
    steady_note: str = ""

    def describe(self) -> str:
        """`compiled regions past their first calls: 3.1 ms with it, 9.8 ms with compilation off; whole runs ...`."""
        if self.steady_s is None:
            steady = f"steady state not measured ({self.steady_note})"
        else:
            eager = (f", {self.all_eager_steady_s * 1e3:.1f} ms with compilation off"
                     if self.all_eager_steady_s is not None else "")
            steady = f"compiled regions past their first calls: {self.steady_s * 1e3:.1f} ms with it{eager}"
        eager_run = f", {self.all_eager_s:.1f} s with compilation off" if self.all_eager_s is not None else ""
        return f"{steady}; whole runs ({self.what}): {self.seconds:.1f} s with it{eager_run}"


# What a workaround takes away, narrowest first: one compiler pass or setting (every graph stays compiled), one
# call, one function, a simpler backend for every compile, then one `torch.compile` site compiling nothing.
# `upgrade`: a newer torch release, verified on the repro only (`verified_upgrade`); not a change to the script.
WorkaroundKind = Literal["config", "call", "function", "backend", "site", "upgrade"]
WORKAROUND_KINDS: tuple[WorkaroundKind, ...] = ("config", "call", "function", "backend", "site")


@dataclass(frozen=True, slots=True)
class Workaround:
    """A change to the user's script that makes it run (`diagnose.workarounds`): `change` in words, `patch` a
    unified diff of their file, `verified` when a copy of the script with it ran to the end with its own checks
    passing (`outcome` says how the copy's run ended), `graphs_kept_compiled` how many graphs the script's own
    backend still compiled in that run (None: not counted). `kind` says how much it takes away, narrowest first
    (`WORKAROUND_KINDS`). `verified_on` says what it was verified on: a copy of the whole `script`, or only the
    `repro`: an upgrade of torch (kind `upgrade`, `diagnose.upgrade`), which changes no line of the script:
    repro.py passes under the newer release."""

    change: str
    patch: str
    verified: bool
    outcome: str
    cost: WorkaroundCost | None = None
    graphs_kept_compiled: int | None = None
    kind: WorkaroundKind = "backend"
    verified_on: Literal["script", "repro"] = "script"


def handed_over(workarounds: tuple[Workaround, ...] | list[Workaround]) -> Workaround | None:
    """The change to the script handed over first: the narrowest verified (`WORKAROUND_KINDS`), the first tried
    among equals. An upgrade of torch is no change to the script: `verified_upgrade` hands it over, before."""
    verified = [w for w in workarounds if w.verified and w.verified_on == "script"]
    return min(verified, key=lambda w: WORKAROUND_KINDS.index(w.kind)) if verified else None


def verified_upgrade(workarounds: tuple[Workaround, ...] | list[Workaround]) -> Workaround | None:
    """The upgrade of torch that made repro.py pass (`diagnose --versions`), handed over first."""
    return next((w for w in workarounds if w.verified and w.verified_on == "repro"), None)


@dataclass(frozen=True, slots=True)
class Diagnosis:
    command: tuple[str, ...]
    category: Category | None  # None when nothing failed
    stage: FailingStage | None
    stages: dict[str, StageOutcome] = field(default_factory=dict)
    subsystem: str | None = None
    flaky: bool = False
    repro: str | None = None
    repro_verified: bool = False  # every verification run of repro.py failed as the script did
    repro_runs: VerifyRuns | None = None  # how many did: short of every run is flaky (and `flaky` is set)
    replay: str | None = None  # replay.py: the failing frame alone, for a Dynamo failure
    replay_verified: bool = False
    minified_nodes: int | None = None
    culprit_ops: tuple[str, ...] = ()
    culprit_sources: tuple[NodeOrigin, ...] = ()  # the user's calls and lines the minimal graph's nodes came from
    input_needs: tuple[InputNeed, ...] = ()  # properties of the minimal repro's inputs its failure needs
    user_frames: tuple[SourceLoc, ...] = ()
    headline: str = ""
    error: str = ""
    hint: str = ""
    original_backend: str | None = None
    attempts: tuple[Attempt, ...] = ()
    bisection: Bisection | None = None
    settings: SettingSearch | None = None  # compiler settings tried on the minimal graph or reduced program
    minify: MinifyResult | None = None
    program: ProgramRepro | None = None  # repro.py as the reduced program, when no graph repro verified
    next_steps: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)
    environment: Environment = Environment()
    interrupted: bool = False
    exit_code: int = 0
    export: ExportFinding | None = None  # the entry point, the step and the fix, for a torch.export / AOTI failure
    torchrun: tuple[str, ...] | None = None  # the script ran as a job through torchrun, with these flags
    rank: str | None = None  # a job: the rank whose failure ended first, the one diagnosed (`rank 1`)
    ranks: int | None = None  # a job: how many ranks it ran
    control: Control | None = None  # the trivial program of the same kind, where one was run
    short: ShortForm | None = None  # repro.py is the short form: the harness form and the regression test beside it
    test: str | None = None  # test_repro.py, repro.py as a regression test in PyTorch's idiom, verified both ways
    # tried on copies of the script, narrowest first; the first verified one leads
    workarounds: tuple[Workaround, ...] = ()
    where_to_look: tuple[SourceRef, ...] = ()  # PyTorch's source for what was found (installed torch)
    runtime: RuntimeTriage | None = None  # runtime triage: the first kernel that faulted or made NaN/Inf
    needs_compiler: NeedsCompiler | None = None  # the runs without the compiler fail otherwise, out of memory
    versions: VersionsResult | None = None  # repro.py under other torch releases (`diagnose --versions`)
    runs: RunLedger | None = None  # every run it made, by step (`diagnose.ledger`)
    # written before the diagnosis ended (the verdict first, the hand-over after it): the steps still to come, some
    # of which may not apply; () once it ended
    pending: tuple[str, ...] = ()
    stopped_by: str = ""  # why it ended early: "SIGINT", "SIGTERM", "SIGHUP" or "budget" (--budget); "" it did not
    schema: str = SCHEMA

    @property
    def failed(self) -> bool:
        return self.category is not None

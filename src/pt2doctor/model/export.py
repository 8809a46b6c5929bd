"""torch.export and AOTInductor: the steps a script goes through, what the child saw of them, and what
`diagnose` concluded about a failure in one of them.

Contract: torch-free values. The child (`export.capture.observer`) appends one `ExportEvent` per
line to `export.jsonl` in the run directory: a `STARTED` line before a step runs and a `PASSED` or
`FAILED` line after it, flushed at once, so a step that kills the process (a segfaulting package) is
the one left `STARTED`. `failing_step(events)` reads that log back: the step the run ended in, if any.
`ExportFinding` is what `diagnose` says about such a failure: which entry point, which step, which kind
of failure, the user's line and a fix that was verified by re-running a copy of the script with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import msgspec

from pt2doctor.model.ids import SourceLoc

EVENTS_FILE = "export.jsonl"


class EntryPoint(str, Enum):
    """The PT2 entry point a failure came through."""

    COMPILE = "torch.compile"
    EXPORT_STRICT = "torch.export (strict)"
    EXPORT_NON_STRICT = "torch.export (non-strict)"


class ExportStep(str, Enum):
    """One step of the export-and-deploy path, in the order a script goes through them."""

    STRICT_TRACE = "strict_trace"  # torch.export.export(strict=True): Dynamo with export on
    NON_STRICT_TRACE = "non_strict_trace"  # torch.export.export(): Python runs under a tracing context
    RUN_DECOMPOSITIONS = "run_decompositions"  # ExportedProgram.run_decompositions
    AOTI_COMPILE = "aoti_compile"  # torch._inductor.aoti_compile_and_package: lowering and the C++ compile
    AOTI_LOAD = "aoti_load"  # torch._inductor.aoti_load_package
    AOTI_RUN = "aoti_run"  # a call of the loaded package


TRACE_STEPS = (ExportStep.STRICT_TRACE, ExportStep.NON_STRICT_TRACE)
AOTI_STEPS = (ExportStep.AOTI_COMPILE, ExportStep.AOTI_LOAD, ExportStep.AOTI_RUN)

STEP_TITLES = {
    ExportStep.STRICT_TRACE: "strict tracing (torch.export.export(strict=True))",
    ExportStep.NON_STRICT_TRACE: "non-strict tracing (torch.export.export)",
    ExportStep.RUN_DECOMPOSITIONS: "ExportedProgram.run_decompositions",
    ExportStep.AOTI_COMPILE: "AOTInductor lowering / C++ compile (aoti_compile_and_package)",
    ExportStep.AOTI_LOAD: "loading the AOTInductor package (aoti_load_package)",
    ExportStep.AOTI_RUN: "running the AOTInductor package",
}


class Phase(str, Enum):
    STARTED = "started"
    PASSED = "passed"
    FAILED = "failed"


class ExportEvent(msgspec.Struct, frozen=True, omit_defaults=True):
    """One line of `export.jsonl`: step `step` (the `index`-th step the script started) started or
    ended; a failed step carries the exception's qualified type and message. `module`: for a tracing
    step, the qualified class of the module it exports (`torch.export.unflatten.UnflattenedModule`)."""

    index: int
    step: ExportStep
    phase: Phase
    error_type: str = ""
    message: str = ""
    module: str = ""


def failing_step(events: list[ExportEvent]) -> ExportEvent | None:
    """The step the run ended in: the last step started, when it never ended (the process died in it)
    or ended by raising. None when the last step passed (the failure, if any, came after it)."""
    if not events:
        return None
    last = events[-1]
    return None if last.phase is Phase.PASSED else last


def steps_passed(events: list[ExportEvent]) -> tuple[ExportStep, ...]:
    """The steps that ran to their end, in order, each once."""
    return tuple(dict.fromkeys(e.step for e in events if e.phase is Phase.PASSED))


def entry_point(events: list[ExportEvent]) -> EntryPoint:
    """How the script captured its program: the first tracing step it ran, else torch.compile."""
    traced = next((e.step for e in events if e.step in TRACE_STEPS), None)
    if traced is None:
        return EntryPoint.COMPILE
    return EntryPoint.EXPORT_STRICT if traced is ExportStep.STRICT_TRACE else EntryPoint.EXPORT_NON_STRICT


RECORDING_DIR = "export"  # under a recorded run's directory: what a repro of an AOTInductor failure needs


class ExportRecording(msgspec.Struct, frozen=True):
    """What a recorded run kept of its first AOTInductor compile (`recording.json` in `RECORDING_DIR`):
    the exported program (`torch.export.save`), the compiler config as code lines, the
    `inductor_configs` argument as source, and the first call's inputs (`torch.save` of (args, kwargs);
    the file exists only once the package was called). `error`: why something could not be kept."""

    program: str
    inputs: str
    config_lines: tuple[str, ...] = ()
    inductor_configs: str = "None"
    error: str = ""

    def inductor_config_lines(self) -> tuple[str, ...]:
        """The config lines a repro of the AOTInductor compile sets: Inductor's only (Dynamo's does not act
        on a program already exported, and export sets some of it), less what AOTInductor itself writes
        while it compiles."""
        return tuple(line for line in self.config_lines
                     if line.startswith(_INDUCTOR) and not line.startswith(_SET_BY_AOTI))


_INDUCTOR = ("import torch._inductor.config", "torch._inductor.config.")
_SET_BY_AOTI = "torch._inductor.config.aot_inductor.metadata"


class ExportFailureKind(str, Enum):
    """What kind of failure an export step ended in."""

    DATA_DEPENDENT = "data_dependent"  # a guard or branch on a value only known when it runs
    CONSTRAINT_VIOLATION = "constraint_violation"  # the dynamic_shapes spec does not hold for the program
    UNSUPPORTED = "unsupported"  # a construct the tracing mode does not support
    INVALID_SPEC = "invalid_spec"  # the dynamic_shapes spec does not have the structure of the module's inputs
    EXPORT_INTERNAL = "export_internal"  # torch.export itself failed (a bug, not the program)
    USER_CODE = "user_code"  # the program raises it itself, with compilation off too
    AOTI_COMPILE = "aoti_compile"
    AOTI_LOAD = "aoti_load"
    AOTI_RUNTIME = "aoti_runtime"
    WRONG_RESULT = "wrong_result"  # the package computes otherwise than the exported program run eagerly


@dataclass(frozen=True, slots=True)
class ExportFix:
    """A change at the user's line; `verified`: a copy of the script with it exported (and ran) without the
    failure. `replaces`: how many lines from `at` the change replaces (0: inserted before `at`)."""

    text: str
    at: SourceLoc
    replaces: int = 0
    verified: bool = False
    outcome: str = ""  # what the run with the fix did, in words
    script_passed: bool = False  # and the whole script then ran without an error


@dataclass(frozen=True, slots=True)
class ExportFinding:
    """`diagnose`'s verdict on a failure in the export path (`Diagnosis.export`)."""

    entry: EntryPoint
    step: ExportStep | None  # None: every step passed and the program failed after them (a wrong result)
    kind: ExportFailureKind
    user_line: SourceLoc | None = None
    fixes: tuple[ExportFix, ...] = ()
    other_mode_passes: bool | None = None  # the other tracing mode, tried: None when not tried
    eager_passes: bool | None = None  # the run with AOTInductor replaced by the exported program, run eagerly
    repro: str | None = None  # repro.py of an AOTInductor failure: the exported program, compiled and run
    repro_verified: bool = False  # it fails the same way in a fresh interpreter
    judged: str = ""  # a wrong result judged in the run itself: what differs, against what
    # the package ran on inputs its exported program rejects (a guard on their shapes): AOTInductor checked none
    unchecked_inputs: bool = False

"""What a failure in the export path is, and how it is said. Pure: no runs, no I/O.

Contract: `failure_kind(event)` names the kind of failure an export step ended in (the first rule of a
table that matches the exception's type and message; AOTInductor steps by the step itself);
`CATEGORIES` maps each kind to the failure category `run` and `diagnose` use everywhere (a planted
AOTInductor compile error is a `kernel_failure`, as an Inductor one is). `user_line(failure)` is the
user's line the tracer was at (Dynamo's "from user code" block under strict export, the innermost user
frame of the traceback under non-strict). `conclude_export(found, finding, category)` writes the verdict (stage,
category, frames) of a finding and ends the diagnosis on it (`diagnose.endings.Exported`), and returns the finding;
`export_said(category, error, finding)` is how that ending is said (`diagnose.conclusions.said`): the headline and
the next steps.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pt2doctor.diagnose.endings import Exported
from pt2doctor.diagnose.user_frames import traced_frames
from pt2doctor.model import Category, Failure, SourceLoc
from pt2doctor.model.diagnosis import FailingStage
from pt2doctor.model.export import (
    STEP_TITLES,
    TRACE_STEPS,
    EntryPoint,
    ExportEvent,
    ExportFailureKind,
    ExportFinding,
    ExportFix,
    ExportStep,
    Phase,
)

if TYPE_CHECKING:
    from pt2doctor.diagnose.found import Found

_Kind = ExportFailureKind

_RULES: tuple[tuple[ExportFailureKind, re.Pattern[str]], ...] = (
    (_Kind.CONSTRAINT_VIOLATION, re.compile(r"Constraints violated|ConstraintViolation")),
    (_Kind.DATA_DEPENDENT, re.compile(r"GuardOnDataDependentSymNode|data-dependent", re.I)),
    (_Kind.UNSUPPORTED, re.compile(r"torch\._dynamo\.exc\.(Unsupported|UserError)|UnsupportedOperatorException")),
)
# export's check of the inputs against the dynamic_shapes spec, which follows the module's forward signature
_SPEC_STRUCTURE = re.compile(r"Detected mismatch between the structure of `\w+` and `dynamic_shapes`")
_AOTI_KINDS = {ExportStep.AOTI_COMPILE: _Kind.AOTI_COMPILE, ExportStep.AOTI_LOAD: _Kind.AOTI_LOAD,
               ExportStep.AOTI_RUN: _Kind.AOTI_RUNTIME}

CATEGORIES = {
    _Kind.DATA_DEPENDENT: Category.GRAPH_BREAK,  # the program cannot be captured whole, as under fullgraph=True
    _Kind.UNSUPPORTED: Category.GRAPH_BREAK,
    _Kind.INVALID_SPEC: Category.USER_ERROR,
    _Kind.CONSTRAINT_VIOLATION: Category.USER_ERROR,  # the script's dynamic_shapes spec is wrong
    _Kind.EXPORT_INTERNAL: Category.DYNAMO_INTERNAL,
    _Kind.USER_CODE: Category.USER_ERROR,
    _Kind.AOTI_COMPILE: Category.KERNEL_FAILURE,
    _Kind.AOTI_LOAD: Category.BACKEND_FAILURE,
    _Kind.AOTI_RUNTIME: Category.KERNEL_FAILURE,
    _Kind.WRONG_RESULT: Category.ACCURACY,
}


def failure_kind(event: ExportEvent | None, in_torch: bool = False) -> ExportFailureKind:
    """`event`: the step the run ended in (None: every step passed and the program's check failed after);
    `in_torch`: the error was raised inside torch's own code (a builtin type such as RuntimeError too)."""
    if event is None:
        return _Kind.WRONG_RESULT
    if event.step in _AOTI_KINDS:
        return _AOTI_KINDS[event.step]
    text = f"{event.error_type}\n{event.message}"
    if _SPEC_STRUCTURE.search(event.message):
        # the spec was checked against the module's signature: the script's own module's, its spec is wrong;
        # a module torch made (torch.export.unflatten's), torch's signature does not stand for the inputs
        return _Kind.EXPORT_INTERNAL if event.module.startswith("torch.") else _Kind.INVALID_SPEC
    fallback = _Kind.EXPORT_INTERNAL if event.error_type.startswith("torch.") or in_torch else _Kind.USER_CODE
    return next((kind for kind, rule in _RULES if rule.search(text)), fallback)


def category_of(kind: ExportFailureKind, event: ExportEvent | None) -> Category:
    if kind is _Kind.AOTI_RUNTIME and event is not None and event.phase is Phase.STARTED:
        return Category.RUNTIME_CRASH  # the process died inside the package's call
    if kind is _Kind.EXPORT_INTERNAL and event is not None and event.step is ExportStep.RUN_DECOMPOSITIONS:
        return Category.BACKEND_FAILURE  # AOTAutograd's functionalization and decompositions, as under compile
    return CATEGORIES[kind]


# The torch.compile stage that does the work of each export step, so `stage` means the same on both paths:
# tracing is graph capture, run_decompositions is AOTAutograd's functionalization and decompositions,
# AOTInductor is Inductor (a wrong result of the package too).
STEP_STAGES = {ExportStep.STRICT_TRACE: FailingStage.DYNAMO, ExportStep.NON_STRICT_TRACE: FailingStage.DYNAMO,
               ExportStep.RUN_DECOMPOSITIONS: FailingStage.AOT_AUTOGRAD, ExportStep.AOTI_COMPILE: FailingStage.INDUCTOR,
               ExportStep.AOTI_LOAD: FailingStage.INDUCTOR, ExportStep.AOTI_RUN: FailingStage.INDUCTOR}


def user_line(failure: Failure | None) -> SourceLoc | None:
    if failure is None:
        return None
    traced = traced_frames(failure.message)
    if traced:
        return traced[0]
    return failure.user_frames[-1] if failure.user_frames else None


def conclude_export(found: Found, finding: ExportFinding, category: Category) -> ExportFinding:
    found.stage = STEP_STAGES[finding.step] if finding.step else FailingStage.INDUCTOR  # the package's result
    found.category = category
    if finding.user_line is not None:
        found.user_frames = [finding.user_line, *(f for f in found.user_frames if f != finding.user_line)]
    found.ending = Exported()
    return finding


def export_said(category: Category | None, error: str, finding: ExportFinding) -> tuple[str, list[str]]:
    """The headline and the next steps of a diagnosis that concluded on `finding`."""
    where = STEP_TITLES[finding.step] if finding.step else "the package's result (every export step passed)"
    entry = "" if finding.step in TRACE_STEPS else f" ({finding.entry.value})"
    said = category.value if category else Category.UNCLASSIFIED.value
    return f"{said} in {where}{entry}: {error}", _STEPS[finding.kind](finding)


def _at(finding: ExportFinding) -> str:
    line = finding.user_line
    return f" at {line.file}:{line.line}" + (f" (`{line.code}`)" if line and line.code else "") if line else ""


def _fix_steps(finding: ExportFinding) -> list[str]:
    verified = sorted((f for f in finding.fixes if f.verified), key=lambda f: not f.script_passed)
    if verified:
        return [f"Fix (verified: {f.outcome}, in a copy of the script): {_where_fix_goes(f)}: `{f.text}`"
                for f in verified[:1]]
    return [f"Tried, did not fix it: `{f.text}` ({f.outcome})" for f in finding.fixes]


def _where_fix_goes(fix: ExportFix) -> str:
    if not fix.replaces:
        return f"before line {fix.at.line} (`{fix.at.code}`)"
    lines = f"line {fix.at.line}" if fix.replaces == 1 else f"lines {fix.at.line}-{fix.at.line + fix.replaces - 1}"
    return f"in place of {lines} (`{fix.at.code}`{' ...' if fix.replaces > 1 else ''})"


def _other_mode(finding: ExportFinding) -> list[str]:
    if finding.other_mode_passes is None:
        return []
    other = "strict=False" if finding.entry is EntryPoint.EXPORT_STRICT else "strict=True"
    if finding.other_mode_passes:
        return [f"torch.export.export(..., {other}) traces it (verified by a run with it): use that mode."]
    return [f"torch.export.export(..., {other}) fails too (verified by a run with it)."]


def _data_dependent(finding: ExportFinding) -> list[str]:
    return [f"torch.export cannot decide a condition on a value it only knows at run time{_at(finding)}.",
            *_fix_steps(finding), *_other_mode(finding),
            "Otherwise: torch._check(...) the fact the code relies on before that line, torch.cond for a real "
            "branch on a tensor, or torch.sym_max/sym_min/sym_not for arithmetic on sizes."]


def _constraint(finding: ExportFinding) -> list[str]:
    return ["The dynamic_shapes spec allows sizes the program does not support (torch printed the range it does).",
            *_fix_steps(finding)]


def _invalid_spec(finding: ExportFinding) -> list[str]:
    return ["The dynamic_shapes spec does not have the structure of the inputs as the module's forward signature "
            "binds them (one entry per forward parameter; a *args parameter takes a tuple of the positional inputs)."]


def _unsupported(finding: ExportFinding) -> list[str]:
    return [f"The tracer does not support the code{_at(finding)}.", *_other_mode(finding)]


def _internal(finding: ExportFinding) -> list[str]:
    if finding.kind is _Kind.USER_CODE:
        return [f"The program raised it while being traced{_at(finding)}: fix it there.", *_other_mode(finding)]
    return [f"torch.export itself failed in {STEP_TITLES[finding.step] if finding.step else 'export'}: file it "
            "with issue.md.", *_other_mode(finding)]


def _aoti(finding: ExportFinding) -> list[str]:
    steps = ["With AOTInductor replaced by the exported program run eagerly (ep.module()), the script passes "
             "(verified by a run): the bug is in AOTInductor, not in the program or in torch.export.",
             "File it with issue.md; until it is fixed, run ep.module() or torch.compile the model instead."]
    return steps if finding.eager_passes else steps[1:]


def _wrong_result(finding: ExportFinding) -> list[str]:
    if finding.step is None or finding.step in _AOTI_KINDS:
        return _aoti(finding)
    if finding.step in TRACE_STEPS:
        return [f"The exported program computes otherwise than the module it was exported from: {finding.judged}.",
                "torch.export specializes on what it saw while tracing: Python numbers, globals and attributes the "
                "module reads besides its inputs, sizes not in dynamic_shapes; it keeps no side effects. If the "
                "module reads such state and the script changes it after exporting, pass it as an input; "
                "otherwise it is a torch.export bug: file it with issue.md."]
    return [f"Judged in the run, on copies of the same inputs: {STEP_TITLES[finding.step]} returned a program "
            f"that is not the one it was given: {finding.judged}.",
            "The bug is in torch.export, not in the program: file it with issue.md."]


def unchecked_inputs_steps(finding: ExportFinding) -> list[str]:
    """A package that ran on inputs its exported program rejects: AOTInductor's checks of its inputs were not run."""
    if not finding.unchecked_inputs:
        return []
    return ["The package ran on inputs its exported program rejects (a guard on their shapes) and computed on them: "
            "the installed torch compiles a package's checks of its inputs in but runs them only where the "
            "environment sets AOTI_RUNTIME_CHECK_INPUTS=1 (where to look). Set it so the package raises on inputs it "
            "was not compiled for (not verified here), and export with dynamic_shapes= for the sizes you call it "
            "with."]


_STEPS = {_Kind.DATA_DEPENDENT: _data_dependent, _Kind.CONSTRAINT_VIOLATION: _constraint,
          _Kind.UNSUPPORTED: _unsupported, _Kind.INVALID_SPEC: _invalid_spec, _Kind.EXPORT_INTERNAL: _internal,
          _Kind.USER_CODE: _internal, _Kind.AOTI_COMPILE: _aoti, _Kind.AOTI_LOAD: _aoti, _Kind.AOTI_RUNTIME: _aoti,
          _Kind.WRONG_RESULT: _wrong_result}

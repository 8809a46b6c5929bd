"""`diagnose` for a script that fails in torch.export or AOTInductor: the entry point, the step, the kind.

Contract: `diagnose_export(runner, found, failed_run)` is called by the procedure once the
failure is reproduced. It reads the export steps the failing run went through (`export.jsonl`,
`model.export`) and the programs judged in it (`export-checks.jsonl`, `model.export_draft`), and
returns None, touching nothing, when the failure is not in the export path (no step failed, no
program was judged wrong, and no AOTInductor package ran before the failure): the torch.compile
procedure goes on.
Otherwise it makes the runs that tell the kinds apart, concludes `found` (its verdict and ending) and returns
`ExportDiagnosed`: the finding (`model.export.ExportFinding`), with the one-op control where one ran:
- every step passed and a program the script derived (a `run_decompositions` result) was judged wrong
  against the program it came from, in the run: an accuracy failure of that step, no further run;
- every step passed, nothing was judged wrong and no package ran, but the script failed after tracing:
  one run with export off (`Overrides.export_off`); when it passes, the exported program computes
  otherwise than the module it came from (an accuracy failure of the tracing step), else the
  torch.compile procedure goes on (the failure is not export's);
- a tracing step failed: the kind from the error (`verdict.failure_kind`), one run with the
  other tracing mode (strict <-> non-strict), and for a data-dependent guard or a constraint violation
  the fixes that a copy of the script verifies (`verify`);
- an AOTInductor step failed, or the script's own check failed after the package ran: one run with
  compilation off, AOTInductor included (the package replaced by the exported program run eagerly).
  When that run fails too, it is the script's bug (`user_error`); else AOTInductor's, and the recorded
  exported program becomes a standalone repro.py, verified in a fresh interpreter (`repro`);
  with `options` (minifying on), its graph is then minified, AOTInductor the oracle (`minify`).
With minifying on, a failure that has no verified repro by then (a tracing or decomposition failure, a
wrong result no recorded call shows) gets the user's program reduced, the failing step the oracle
(`diagnose.program`, `reduce.program`): it must still fail in that step and pass with it turned off.
Not when a verified change of the program (a fix, the other tracing mode) already answers it, unless
torch itself is at fault (an internal error, a wrong result, AOTInductor).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from pt2doctor.analysis.failures import raised_in_torch
from pt2doctor.capture.process_meta import RunPaths, records
from pt2doctor.diagnose.conclusions import environment_fails, user_error
from pt2doctor.diagnose.control import ControlKind, start_control
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.options import DiagnoseOptions
from pt2doctor.diagnose.program import reduce_the_program
from pt2doctor.diagnose.runs import VariantRunner
from pt2doctor.diagnose.variants import Variant
from pt2doctor.export.diagnose.minify import minify_export
from pt2doctor.export.diagnose.repro import export_repro
from pt2doctor.export.diagnose.verdict import category_of, conclude_export, failure_kind, user_line
from pt2doctor.export.diagnose.verify import verify_failure_fixes
from pt2doctor.model import Category
from pt2doctor.model.child import Overrides
from pt2doctor.model.diagnosis import Attempt, Control
from pt2doctor.model.export import (
    AOTI_STEPS,
    STEP_TITLES,
    TRACE_STEPS,
    EntryPoint,
    ExportEvent,
    ExportFailureKind,
    ExportFinding,
    ExportStep,
    Phase,
    entry_point,
    failing_step,
    steps_passed,
)
from pt2doctor.model.export_draft import ExportCheck, failed_checks
from pt2doctor.reduce.program import target_of


def export_events(run_dir: Path) -> list[ExportEvent]:
    return records(RunPaths(run_dir).export_log, ExportEvent)  # a torn last line: the lines before stand


def diagnose_export(runner: VariantRunner, found: Found, failed_run: Attempt, options: DiagnoseOptions | None = None,
                    minify_reporter: object = None, known: Callable[[], object] | None = None
                    ) -> ExportDiagnosed | None:
    """Where the export path concluded, what it ran for the report; `known` is called once the category and the stage
    are (before the program is reduced: the verdict first)."""
    events = export_events(runner.run_dir(failed_run.label))
    failed = failing_step(events)
    if failed is not None and not _ended_with(failed, failed_run):
        return None  # the script went on after a failed step (caught it) and failed elsewhere
    wrong = failed_checks(records(RunPaths(runner.run_dir(failed_run.label)).export_checks, ExportCheck))
    traced = next((s for s in steps_passed(events) if s in TRACE_STEPS), None)
    after_trace = failed is None and not wrong and ExportStep.AOTI_RUN not in steps_passed(events)
    if after_trace and (traced is None or not _passes_with_export_off(runner, found)):
        return None
    entry, control = entry_point(events), None
    with found.timed("export"):
        if failed is not None and failed.step not in AOTI_STEPS:
            finding = _tracing(runner, found, entry, failed)
        elif after_trace and traced is not None:
            finding = conclude_export(found, ExportFinding(entry, traced, ExportFailureKind.WRONG_RESULT,
                                                           judged=_EXPORT_OFF, eager_passes=True), Category.ACCURACY)
        elif failed is None and wrong and wrong[0].step not in AOTI_STEPS:
            finding = _wrong_program(found, entry, wrong[0])
        else:
            found.notes += [f"judged in the run: {STEP_TITLES[c.step]} against {c.against}: {c.detail}" for c in wrong]
            finding, control = _aoti(runner, found, entry, failed, failed_run, options, minify_reporter)
            if wrong:
                finding = replace(finding, judged=_judged(wrong[0]), unchecked_inputs=wrong[0].rejected)
    if known is not None:
        known()
    if options is not None and options.minify and _wants_a_repro(found, finding, control):
        step = failed.step if failed is not None else wrong[0].step if wrong else traced if after_trace else None
        # no step failed or was judged wrong, not after tracing: the script's check failed after the package ran
        with runner.gpu.whole():  # its workers and verification runs are the program's too
            reduce_the_program(options, found, runner.reporter, failed_run, None, "export", step or ExportStep.AOTI_RUN,
                               runner.gpu.limit)
    return ExportDiagnosed(finding, control)


@dataclass(frozen=True)
class ExportDiagnosed:
    """The export path concluded: what it found (the entry point, the step, the kind, the repro, the fixes tried) and
    `control`, the one-op package run where AOTInductor failed (`_control`)."""

    finding: ExportFinding
    control: Control | None = None


_EXPORT_OFF = ("with export off (torch.export.export returning a stand-in whose module() is the module itself, run "
               "eagerly) the script passes (verified by a run)")


def _passes_with_export_off(runner: VariantRunner, found: Found) -> bool:
    """Whether the script passes with export turned off: its failure after tracing passed is export's doing
    (the exported program computes otherwise than its module), not the script's."""
    runner.reporter.status("the script failed after exporting: running it with export off (ep.module() the module "
                           "itself)")
    attempt = runner.submit(Variant("export-off", None, Overrides(export_off=True))).result()
    found.attempts.append(attempt)
    return attempt.outcome == "pass"


def _wants_a_repro(found: Found, finding: ExportFinding, control: Control | None) -> bool:
    """No verified repro yet, and the failure is torch's to fix: not the machine's (`control`), nor one a verified
    change of the program (a fix, the other tracing mode) already answers."""
    if finding.repro_verified or (found.minify and found.minify.verified):
        return False
    if control is not None and control.fails_the_same_way:  # the machine's, not the program's
        return False
    answered = any(f.verified for f in finding.fixes) or finding.other_mode_passes is True
    return finding.kind in _TORCHS or not answered


_TORCHS = (ExportFailureKind.EXPORT_INTERNAL, ExportFailureKind.WRONG_RESULT, ExportFailureKind.AOTI_COMPILE,
           ExportFailureKind.AOTI_LOAD, ExportFailureKind.AOTI_RUNTIME)


def _wrong_program(found: Found, entry: EntryPoint, check: ExportCheck) -> ExportFinding:
    """A program the script derived was judged wrong in the run itself (`export.capture.checks`): no
    run with compilation off is needed, the reference ran beside it on copies of the same inputs."""
    finding = ExportFinding(entry, check.step, ExportFailureKind.WRONG_RESULT, judged=_judged(check))
    return conclude_export(found, finding, Category.ACCURACY)


def _judged(check: ExportCheck) -> str:
    return f"{check.detail} (against {check.against}, on {check.inputs or 'the same inputs'})"


def _ended_with(failed: ExportEvent, run: Attempt) -> bool:
    """The run ended in this step: it died in it, or with the exception the step raised."""
    return failed.phase is Phase.STARTED or failed.error_type.rsplit(".", 1)[-1] in run.error


def _tracing(runner: VariantRunner, found: Found, entry: EntryPoint, failed: ExportEvent) -> ExportFinding:
    failure = found.session.failures[0] if found.session and found.session.failures else None
    kind = failure_kind(failed, in_torch=failure is not None and raised_in_torch(failure.traceback))
    strict = failed.step is ExportStep.STRICT_TRACE
    runner.reporter.status(f"{failed.step.value} failed ({kind.value}): trying strict={not strict}")
    other = _other_mode(runner, found, not strict) if failed.step in TRACE_STEPS else None
    line = user_line(found.session.failures[0] if found.session and found.session.failures else None)
    fixes = verify_failure_fixes(runner, found, kind, failed, line)
    finding = ExportFinding(entry, failed.step, kind, line, fixes, other_mode_passes=other)
    return conclude_export(found, finding, category_of(kind, failed))


def _other_mode(runner: VariantRunner, found: Found, strict: bool) -> bool:
    """Whether every export of the script traces in the other mode (a run with it forced)."""
    label = "export-strict" if strict else "export-non-strict"
    attempt = runner.submit(Variant(label, None, Overrides(export_strict=strict))).result()
    found.attempts.append(attempt)
    failed = failing_step(export_events(runner.run_dir(label)))
    return failed is None or failed.step not in TRACE_STEPS


def _aoti(runner: VariantRunner, found: Found, entry: EntryPoint, failed: ExportEvent | None,
          failed_run: Attempt, options: DiagnoseOptions | None, minify_reporter: object
          ) -> tuple[ExportFinding, Control | None]:
    """The finding, and the one-op control where it ran."""
    runner.reporter.status("running it with compilation off (the AOTInductor package replaced by the exported "
                           "program, run eagerly)")
    off = runner.submit(Variant.compilation_off()).result()
    found.attempts.append(off)
    step = failed.step if failed is not None else None
    if off.outcome == "fail":
        user_error(found, off)
        return ExportFinding(entry, step, ExportFailureKind.USER_CODE, eager_passes=False), None
    kind = failure_kind(failed)
    control = _control(runner, found, failed_run) if kind is not ExportFailureKind.WRONG_RESULT else None
    if control is not None and control.fails_the_same_way:  # the environment is at fault, said so
        environment_fails(found, control)
        return ExportFinding(entry, step, kind, eager_passes=True), control
    finding = _with_repro(runner, found, failed_run, failed, ExportFinding(entry, step, kind, eager_passes=True))
    if options is not None:
        finding = minify_export(options, runner.run_dir(failed_run.label), found, finding, runner.reporter,
                                minify_reporter)
    finding = conclude_export(found, finding, category_of(kind, failed))
    if kind is ExportFailureKind.WRONG_RESULT:
        found.notes.append("every export step passed, the script's own check failed after the package ran, and "
                           "passes with the exported program run eagerly instead: the package computes otherwise")
    return finding, control


def _control(runner: VariantRunner, found: Found, failed_run: Attempt) -> Control | None:
    """A one-op program through AOTInductor on this machine (`diagnose.control`): where it fails the same way, the
    environment is at fault (packages that do not load here)."""
    device = "cuda" if found.session and found.session.environment.gpu else "cpu"
    runner.reporter.status(f"AOTInductor failed: does a one-op package fail the same way here ({device})?")
    with found.timed("control"):
        return start_control(ControlKind.AOTI, device, target_of(failed_run.signature or "", False),
                             runner.call.out_dir, runner.call.timeout_s or _REPRO_TIMEOUT_S).result()


def _with_repro(runner: VariantRunner, found: Found, failed_run: Attempt, failed: ExportEvent | None,
                finding: ExportFinding) -> ExportFinding:
    runner.reporter.status("writing repro.py (the exported program, compiled with AOTInductor) and running it")
    with found.timed("export_repro"):
        repro, verified, why = export_repro(runner.run_dir(failed_run.label), runner.call.out_dir, failed,
                                            runner.call.timeout_s or _REPRO_TIMEOUT_S)
    if repro is None or not verified:
        found.notes.append(f"no verified repro.py: {why}")
    return replace(finding, repro=str(repro) if repro else None, repro_verified=verified)


_REPRO_TIMEOUT_S = 600.0

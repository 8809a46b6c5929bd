"""Fixes for an export tracing failure, each verified by exporting a copy of the script with it.

Contract: `verified_fixes(runner, found, kind, failed, line)` takes the source changes of
`export.analysis.fixes` (the one place they are written) for a
data-dependent guard (`torch._check(COND)` or `torch._check(not (COND))` before the `if`/`while` at
the user's line, then the branch rewritten as one `torch.cond`; a branch on a tensor's truth value gets
the `torch.cond` only, as `torch._check` takes no tensor) or a constraint violation (the `Dim` definitions torch suggests, in place of the
script's own), writes each into a copy of the script under `<out>/export-fix/<n>/` (never the user's
file), runs the copy (the script's directory first on `PYTHONPATH`, so its imports resolve as before)
and keeps the verdict: a fix is `verified` when the export call that failed passes in that run.
Only lines of the script file itself are changed: a failure inside an imported module gets no fix.
Candidates are tried one at a time, in order, until the whole script passes with one (a check that
exports but then fails at run time asserts the branch the program does not take: the next one may fit).
"""

from __future__ import annotations

from pathlib import Path

from pt2doctor.export.analysis.fixes import (Edit, apply_edits, cond_candidates, dim_candidates, guard_candidates,
                                             is_tensor_truth)
from pt2doctor.capture.process_meta import RunPaths, records
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.runs import VariantRunner, run_a_copy
from pt2doctor.model import SourceLoc
from pt2doctor.model.export import ExportEvent, ExportFailureKind, ExportFix, Phase


def verified_fixes(runner: VariantRunner, found: Found, kind: ExportFailureKind, failed: ExportEvent,
                   line: SourceLoc | None) -> tuple[ExportFix, ...]:
    script = runner.call.script.resolve()
    source = script.read_text()
    if kind is ExportFailureKind.DATA_DEPENDENT:
        if line is None or Path(line.file).resolve() != script:
            found.notes.append("no fix was tried: the failing line is not in the script itself")
            return ()
        branch = cond_candidates(source, line.line)
        tensor_truth = is_tensor_truth(failed.message)
        candidates = branch if tensor_truth else guard_candidates(source, line.line) + branch
    elif kind is ExportFailureKind.CONSTRAINT_VIOLATION:
        candidates = dim_candidates(source, failed.message)
    else:
        return ()
    fixes: list[ExportFix] = []
    for number, (text, edits) in enumerate(candidates, 1):
        runner.reporter.status(f"trying a fix in a copy of the script: {text}")
        fixes.append(_verify(runner, found, number, source, text, edits, failed))
        if fixes[-1].script_passed:  # else the next candidate may fit the program better (the branch it takes)
            break
    return tuple(fixes)


def _verify(runner: VariantRunner, found: Found, number: int, source: str, text: str, edits: tuple[Edit, ...],
            failed: ExportEvent) -> ExportFix:
    call = runner.call
    attempt, fix_runner = run_a_copy(runner, call.out_dir / "export-fix" / str(number), f"fix-{number}",
                                     apply_edits(source, edits))
    found.attempts.append(attempt)
    events = records(RunPaths(fix_runner.run_dir(attempt.label)).export_log, ExportEvent)
    verified = any(e.index == failed.index and e.step is failed.step and e.phase is Phase.PASSED for e in events)
    passed = verified and attempt.outcome == "pass"
    outcome = ("the export passes and the script then passed" if passed else
               f"the export passes; the script then fails: {attempt.error}" if verified else
               f"still fails: {attempt.error or attempt.outcome}")
    first = edits[-1]  # the change at the line torch pointed at (an inserted definition comes before it)
    at = SourceLoc(str(call.script), first.line, "", source.splitlines()[first.line - 1].strip())
    return ExportFix(text, at, first.replaces, verified, outcome, script_passed=passed)

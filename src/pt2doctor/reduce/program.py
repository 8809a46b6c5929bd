"""Reduce the user's *program* (its Python source) when no graph shows the failure: a Dynamo bug.

Contract: `reduce_program(job, reporter) -> ProgramRepro` shrinks `job.script`'s source with
`pysource_minimize` (statements, expressions, values, names), keeping a candidate only when the
`ProgramOracle` says `FAILS_SAME`:
(a) run compiled (as the script is, or with `job.backend` forced onto every `torch.compile`, the
    `Overrides` of `diagnose`'s variants), it fails with `job.target`: the same failure identity as
    the script's (`analysis.failures.failure_text`; for a wrong result the exception type and its first
    line only where that names no values (`model.signature.check_identity`), raised outside the compiler
    stack so that a crash inside it
    does not pass for the script's check; the signal for a crash that killed the process);
(b) with compilation off (`set_stance("force_eager")`) it runs to the end without an error; where the script itself
    fails so too (eager has a failure of its own: flex_attention's backward, pytorch#145208) and its failure is one
    only the compiler raises (`job.compiler_raised`: no run without the compiler can show it; not on the export
    path, whose (b) turns one step off), only not as (a)
    (`job.off_fails_too`, decided by the oracle on the script's own check; no regression test is written then: it
    could not pass once the bug is fixed).
On the export path (`job.export`, the step that failed) (a) runs every `torch.export.export` call's
module eagerly first and fails otherwise (a reduction may not break the program to fail export), and
(b) turns the failing step off: a wrong `run_decompositions` returns the program it was given,
AOTInductor runs the exported program eagerly, and for a wrong result after tracing, export itself is
off (`ep.module()` is the module it was given); a tracing step that raised has no (b): the rest of
the program may need a real exported program (`torch.export.unflatten`), and (a)'s eager run is what
it must still pass.
(b) is checked only for candidates that pass (a). A deterministic candidate that no longer compiles
anything fails (b) whenever it fails (a); a nondeterministic one may not, so before either a candidate
must still call a compiler and keep some statements exactly as written (`reduce.program_keep.Keep`): for a
wrong result the script's own check (a reduction may not loosen or tighten what "wrong" means: `rtol=1e-4` made
`rtol=0` would pass (a) and (b) and claim a bitwise difference), and every statement that seeds an RNG; a candidate
that can be seen to fail (b) without running it (a name nothing binds: `Keep.allows`) is not run either.
The first candidate is the program cut down to what its failure can depend on (`reduce.program_slice`: the
statements of the failing traceback's lines and the check, what compiles, and what feeds into them), one check for
what deleting statement by statement would find in one check each.
Each check runs the candidate (`reduce.program_harness`) in a child forked from a warm zygote
(`processes.pool.WorkerPool`): no check pays `import torch`, and a crash or hang kills only that child.
The per-check timeout is a few times the first check's time (at most `job.timeout_s`).

The best program so far (fewest lines, then characters) is kept by our checker (`reduce.program_check`), not by
the library: when the budget `job.budget_s` runs out (`stopped_early="budget"`), after `job.patience` new candidates
in a row (or `job.patience_s` seconds) kept nothing (`"no_progress"`), on Ctrl-C (`"interrupted"`) or when the
workers end (`"workers_ended"`) the best is written. Whole statements are deleted first, on the text as written
(`reduce.program_text`), then the library works on the AST; a script that no longer fails once unparsed keeps the text
pass's result. `repro.py` is that program, plain torch only, under a docstring saying what it shows; it is verified in
fresh interpreters (`processes.fresh`) both ways: the harness runs the file compiled and must see `job.target`, and with
compilation off must pass. An interrupted reduction is written, not verified. Progress goes to the reporter:
`program reduction: N checks, M lines -> K lines`.
"""

from __future__ import annotations

import ast
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from pt2doctor.capture.runner import Reporter
from pt2doctor.model.child import Overrides
from pt2doctor.model.diagnosis import ProgramReason, ProgramRepro, StateChange
from pt2doctor.model.export import AOTI_STEPS, ExportStep
from pt2doctor.model.minify import FailureKind, FailureSignature, VerifyRuns
from pt2doctor.model.signature import check_identity, from_description
from pt2doctor.processes.fresh import VERIFY_RUNS, verify
from pt2doctor.processes.pool import WorkerPool
from pt2doctor.reduce.core import Outcome
from pt2doctor.reduce.oracle import judge, signature_of
from pt2doctor.reduce.program_changes import unguarded_changes
from pt2doctor.reduce.program_check import ProgramReduction, StopReduction, code_lines
from pt2doctor.reduce.program_culprits import compiled_calls, dotted
from pt2doctor.reduce.program_harness import ProgramRun, harness_text
from pt2doctor.reduce.program_keep import Keep
from pt2doctor.reduce.program_slice import relevant_part
from pt2doctor.reduce.program_text import delete_statements
from pt2doctor.reduce.regression_test import missing_dependencies, write_program_test

if TYPE_CHECKING:
    from pt2doctor.processes.fresh_forks import FreshForks


@dataclass(frozen=True, slots=True)
class ProgramJob:
    script: Path
    args: tuple[str, ...]
    signature: str  # the failing run's (`analysis.failures.signature`)
    backend: str | None  # forced onto every torch.compile; None: the script's own
    out_dir: Path  # repro.py goes here; the verification harnesses in out_dir/program
    budget_s: float  # for the checks (the workers' warm-up and the verification come on top)
    timeout_s: float  # the most one check may take (less: a few times the first check's time)
    reason: ProgramReason = "dynamo"
    type_only: bool = False  # a wrong result: the exception type alone is the failure's identity
    check_line: int | None = None  # a wrong result: the script's line that raised it (its own check)
    export: ExportStep | None = None  # the failure is in this step of the export path, not in torch.compile
    patience: int | None = None  # stop after this many new candidates in a row kept nothing (None: the budget only)
    patience_s: float | None = None  # or after this many seconds of checks kept nothing (slow checks: compiles)
    at_once: int | None = None  # fresh interpreters of the program that may run at once (the GPU's share); None: any
    focus: tuple[int, ...] = ()  # the script's lines in the failing traceback and its check: the first cut's seeds
    compiler_raised: bool = False  # the failure is one the backend raises compiling (`Policy.compiler_raised`)
    off_fails_too: bool = False  # ... and the script fails with compilation off too: (b) is "not as (a)" there

    @property
    def target(self) -> FailureSignature:
        return target_of(self.signature, self.type_only)


def target_of(signature: str, type_only: bool) -> FailureSignature:
    """The identity a run's signature (`analysis.failures.signature`) stands for: a signal name, a wrong
    result's (`type_only`: `model.signature.check_identity`), or the whole normalised `Type: first line`."""
    if signature in signal.Signals.__members__ or signature.startswith("signal "):
        return FailureSignature(FailureKind.SIGNAL, signature)
    return from_description(check_identity(signature) if type_only else signature)


class ProgramOracle:
    """A candidate source -> one `Outcome` (see the module docstring: (a), then (b))."""

    def __init__(self, pool: WorkerPool, job: ProgramJob) -> None:
        self.pool = pool
        self.target = job.target
        self.compiled, self.off = program_runs(job, job.script.resolve())
        # (b) "not as (a)": given, or decided on the first candidate that passes (a), the script itself (None: not yet)
        decides = job.compiler_raised and job.export is None and not job.off_fails_too
        self.off_fails_too: bool | None = None if decides else job.off_fails_too
        self.failed_uncompiled = 0  # candidates that passed (a) and failed (b)

    def __call__(self, source: str) -> Outcome:
        outcome = judge(self.pool.run([harness_text(source, self.compiled)])[0], self.target)
        if outcome is not Outcome.FAILS_SAME or self.off is None:
            return outcome
        off = self.pool.run([harness_text(source, self.off)])[0]
        otherwise = off.status == "failed" and signature_of(off) != self.target
        if self.off_fails_too is None:
            self.off_fails_too = otherwise
        if off.status == "ok" or (self.off_fails_too and otherwise):
            return Outcome.FAILS_SAME
        self.failed_uncompiled += 1
        return Outcome.FAILS_OTHER


def program_runs(job: ProgramJob, file: Path, force: bool = True) -> tuple[ProgramRun, ProgramRun | None]:
    """How a candidate runs compiled (`job.backend` forced unless `force` is off), and with compilation
    off (None: no such run, see the module docstring): in the script's directory, with its argv, as `file`."""
    where = ProgramRun(str(file), str(job.script.resolve().parent), (file.name, *job.args), type_only=job.type_only)
    if job.export is not None:
        off = _step_off(job)
        return (replace(where, overrides=Overrides(export_runs_module=True)),
                replace(where, overrides=off[0]) if off is not None else None)
    backend = {"backend": job.backend} if job.backend and force else {}
    return (replace(where, overrides=Overrides(compile_kwargs=backend)),
            replace(where, overrides=Overrides(stance="force_eager")))


def compiled_repro(repro: ProgramRepro, script: Path, type_only: bool) -> tuple[ProgramRun, FailureSignature]:
    """How repro.py runs compiled, as its verification ran it (the backend forced unless its calls name it), and the
    failure it must show: for a check of it with one change (`diagnose.setting_search`)."""
    job = ProgramJob(script, (), repro.signature, repro.backend, Path(repro.repro_path).parent, 0.0, 0.0, repro.reason,
                     type_only)
    return program_runs(job, Path(repro.repro_path), force=not repro.backend_in_source)[0], job.target


_AOTI_OFF = (Overrides(export_runs_module=True, export_eager=True),
             "with AOTInductor off (each package replaced by the exported program, run eagerly)")
_STEP_OFF = {ExportStep.RUN_DECOMPOSITIONS: (Overrides(export_runs_module=True, decompositions_off=True),
                                             "with run_decompositions returning the exported program unchanged"),
             **{step: _AOTI_OFF for step in AOTI_STEPS}}
_EXPORT_OFF = (Overrides(export_off=True), "with export off (ep.module() the module it was given, run eagerly)")
COMPILATION_OFF = 'with compilation off (torch.compiler.set_stance("force_eager"))'


def _step_off(job: ProgramJob) -> tuple[Overrides, str] | None:
    """The run that turns the failing export step off, and its words (see the module docstring)."""
    if job.export is None:
        return None
    if job.export in _STEP_OFF:
        return _STEP_OFF[job.export]
    return _EXPORT_OFF if job.type_only else None


def passes_with(job: ProgramJob) -> str | None:
    """The run a reduced program must pass, in words (None: there is none, a tracing step raised, or it fails with
    compilation off too, `job.off_fails_too`)."""
    if job.off_fails_too:
        return None
    if job.export is None:
        return COMPILATION_OFF
    off = _step_off(job)
    return off[1] if off else None


def fails_as(job: ProgramJob) -> str:
    """How a reduced program is run to fail, in words."""
    if job.export is not None:
        return "run as written, each module it exports also run eagerly"
    return f"compiled{f' with backend={job.backend!r}' if job.backend else ''}"


def reduce_program(job: ProgramJob, reporter: Reporter, pool: WorkerPool | None = None,
                   forks: FreshForks | None = None) -> ProgramRepro:
    """Reduce, write repro.py, verify (see the module docstring). `pool`: one already warming (started
    early by the caller), left open (its per-check timeout is this job's while it checks); else one of its own,
    closed at the end. `forks`: where the verifications' fresh runs are forked from (`processes.fresh_forks`)."""
    import pysource_minimize

    started = time.monotonic()
    source = job.script.read_text()
    own = pool is None
    pool = pool or WorkerPool(1, job.timeout_s)
    timeout_s, pool.timeout_s = pool.timeout_s, job.timeout_s
    try:
        with pool if own else nullcontext(pool):
            pool.wait_ready()  # the budget is for checks, not the workers' warm-up
            oracle = ProgramOracle(pool, job)
            keep = Keep.of(source, job.check_line if job.type_only else None)
            reduction = ProgramReduction(oracle, source, job.budget_s, reporter, keep, job.patience, job.patience_s)
            fails = reduction(source)
            job = replace(job, off_fails_too=bool(oracle.off_fails_too))  # (b) as the first check decided it
            if not fails:
                raise CannotReduce(f"the script alone, in a warm worker, {fails_as(job)}, does not fail as "
                                   f"{job.target}" + (f" and pass {passes_with(job)}" if passes_with(job) else ""))
            try:
                focused = relevant_part(source, job.focus) if job.focus else None
                if focused is not None:  # one check for what the failure can depend on (`reduce.program_slice`)
                    reduction(focused)
                delete_statements(reduction.best, reduction)  # the coarse steps first, on the text as written
                pysource_minimize.minimize(reduction.best, reduction, retries=1)
            except pysource_minimize.CouldNotMinimize:
                pass  # unparsed, it no longer fails the same way: the statements deleted as written are the reduction
            except StopReduction:
                pass
            except KeyboardInterrupt:  # between two checks
                reduction.stopped = "interrupted"
    finally:
        pool.timeout_s = timeout_s
    reduction.report()
    changes = unguarded_changes(reduction.best) if job.type_only else ()
    repro, verify_runs, pinned, job = _write(job, reduction, changes, forks)
    verified = bool(verify_runs and verify_runs.every_time)
    def runs(file: Path) -> tuple[ProgramRun, ProgramRun | None]:
        return program_runs(replace(job, args=()), file, force=not pinned)

    test = (write_program_test(repro, runs, max(60.0, job.timeout_s), job.at_once, job.target, forks)
            if verified and not job.off_fails_too and not missing_dependencies() else None)
    return ProgramRepro(
        repro_path=str(repro), signature=job.target.text, backend=job.backend, reason=job.reason,
        lines_before=reduction.lines_before, lines_after=code_lines(reduction.best), checks=reduction.checks,
        check_s=round(reduction.check_s / max(1, reduction.checks), 3), time_s=round(time.monotonic() - started, 1),
        verified=verified, verify_runs=verify_runs, test=str(test) if test else None,
        culprit_ops=(*dict.fromkeys(c.path for c in changes), *compiled_calls(reduction.best)),
        stopped_early=reduction.stopped, improved_at=tuple(reduction.improved_at), backend_in_source=pinned,
        changes=changes, passes_with=passes_with(job) or "",
    )


def _write(job: ProgramJob, reduction: ProgramReduction, changes: tuple[StateChange, ...] = (),
           forks: FreshForks | None = None) -> tuple[Path, VerifyRuns | None, bool, ProgramJob]:
    """Write repro.py and verify it (not when interrupted): with the backend written into its
    `torch.compile` calls where it has any (it then runs as it stands), else with the backend forced.
    Returns the path, how often it failed compiled (None: not verified, or it did not pass with compilation
    off), whether the backend is in the source, and the job it held to: where the script failed with compilation off
    too (`job.off_fails_too`) and the reduced program passes so, held to passing (its header says so)."""
    repro = job.out_dir / "repro.py"
    pinned = pin_backend(reduction.best, job.backend) if job.backend else None
    runs: VerifyRuns | None = None
    for source, in_source in ((pinned, True), (reduction.best, False)):
        if source is None:
            continue
        repro.write_text(_header(job, reduction, in_source, changes) + source)
        if reduction.stopped == "interrupted":
            return repro, None, in_source, job
        runs, off_passed = _verified(repro, job, force=not in_source, forks=forks)
        if runs is not None and runs.every_time:
            if job.off_fails_too and off_passed:
                job = replace(job, off_fails_too=False)
                repro.write_text(_header(job, reduction, in_source, changes) + source)
            return repro, runs, in_source, job
    return repro, runs, False, job


class CannotReduce(Exception):
    """The unchanged program does not pass the oracle: nothing to reduce from."""


def _header(job: ProgramJob, reduction: ProgramReduction, in_source: bool,
            changes: tuple[StateChange, ...] = ()) -> str:
    if job.export is not None:
        how = "Run as written (every module it exports runs eagerly on its inputs)"
    else:
        how = "Compiled (" + ("as written" if not job.backend else f"as written, backend={job.backend!r}" if in_source
                              else f"with backend={job.backend!r} forced onto torch.compile") + ")"
    passes = passes_with(job)
    stopped = ", stopped at its time budget: a line left may not be needed" if reduction.stopped == "budget" else ""
    passing = (f"{passes[0].upper()}{passes[1:]} it passes.\n" if passes else
               f"{COMPILATION_OFF[0].upper()}{COMPILATION_OFF[1:]} it fails otherwise, as the script did: no run "
               "without the compiler raises the failure above.\n" if job.off_fails_too else "")
    return (f'"""{job.script.name}, reduced by pt2doctor ({reduction.lines_before} -> {code_lines(reduction.best)} '
            f'lines{stopped}).\n\n{how} it fails with: {job.target.text}\n' + passing + _stale(changes) + '"""\n')


def _stale(changes: tuple[StateChange, ...]) -> str:
    """The header's words for a stale result: what changed between compiled calls that no guard checks."""
    if not changes:
        return ""
    written = "; ".join(f"`{c.statement}` writes {c.path}" for c in changes)
    text = (f"Between two calls of the compiled code, {written}, which no guard checks: the second call returns "
            "what the state before gave.\n")
    return text.replace("\\", "\\\\").replace('"' * 3, "'" * 3)  # inside the docstring


def verify_program(repro: Path, job: ProgramJob, force: bool = True, forks: FreshForks | None = None
                   ) -> VerifyRuns | None:
    """Both ways, side by side, each in fresh interpreters: compiled (`job.backend` forced unless `force` is
    off) it fails as `job.target` (how often, of `VERIFY_RUNS`), with compilation off (where there is such a
    run) it passes (fails otherwise, `job.off_fails_too`); None when it does not."""
    return _verified(repro, job, force, forks)[0]


def _verified(repro: Path, job: ProgramJob, force: bool, forks: FreshForks | None) -> tuple[VerifyRuns | None, bool]:
    """`verify_program`'s answer, and whether the run with compilation off (if any) passed."""
    scratch = job.out_dir / "program"
    scratch.mkdir(parents=True, exist_ok=True)
    source = repro.read_text()
    runs = [(scratch / name, run) for name, run in zip(("verify_compiled.py", "verify_compilation_off.py"),
                                                       program_runs(job, repro, force)) if run is not None]
    for path, run in runs:
        path.write_text(harness_text(source, run))
    timeout_s = max(60.0, job.timeout_s)
    side_by_side = 2 if job.at_once is None or job.at_once > VERIFY_RUNS else 1
    with ThreadPoolExecutor(side_by_side) as threads:  # compilation off runs once: it must pass, and it did before
        results = list(threads.map(lambda r: verify(r[1][0], job.target, timeout_s=timeout_s, runs=1 if r[0] else
                                                    VERIFY_RUNS, at_once=job.at_once, forks=forks), enumerate(runs)))
    off_passed = all(off.seen is None and off.returncode == 0 for off in results[1:])
    held = off_passed or (job.off_fails_too and all(off.runs.failed == 0 for off in results[1:]))
    return results[0].runs if held else None, off_passed


def pin_backend(source: str, backend: str) -> str | None:
    """`source` with `backend=...` written into every `torch.compile` call and bare `@torch.compile`
    decorator; None when it has none (it compiles some other way: the backend must be forced)."""
    tree = ast.parse(source)
    pinned = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and dotted(node.func) == "torch.compile":
            node.keywords = ([k for k in node.keywords if k.arg != "backend"]
                             + [ast.keyword("backend", ast.Constant(backend))])
            pinned += 1
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bare = [dotted(d) == "torch.compile" for d in node.decorator_list]
            node.decorator_list = [ast.Call(d, [], [ast.keyword("backend", ast.Constant(backend))]) if b else d
                                   for d, b in zip(node.decorator_list, bare)]
            pinned += sum(bare)
    return ast.unparse(tree) + "\n" if pinned else None

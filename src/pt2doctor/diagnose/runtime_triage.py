"""Runtime triage: the first kernel that faults or makes NaN/Inf, its fused ops, the user's line, the fault.

Contract: the step `runtime_triage` (when `triages`; `diagnose.procedure`, right after the side runs start,
so the minifier can start from its kernel) calls `triage_runtime(options, runner, found, failed, on_cuda)`,
which runs when the script's Inductor-compiled code crashed as it ran (a signal, a CUDA kernel error) or gave
a wrong result with NaN/Inf in it, or on CUDA a wrong result at all (`wanted`); otherwise it does nothing.
`triage_flaky` runs it for a failure that did not repeat, on CUDA (`diagnose.procedure`, before it ends).
On CUDA, compute-sanitizer's memcheck runs where the machine has it (`run_sanitizer`: the script as
the user runs it, with compile caches of its own; its absence is said); a wrong result with finite values
goes on only when it found a bad access. One more run of the script (`Variant.kernels_checked`; for a crash or
NaN/Inf it is wanted whatever memcheck finds, and starts beside memcheck, as the GPU's share allows):
deterministic (no caching allocator, launches blocking and a sync after each kernel on CUDA; on CPU a
kernel runs synchronously anyway), every kernel checked as it runs (`capture.child.kernel_check`), within a
budget (`budget_s`): when it runs out the run is stopped and what its records hold is kept (`out_of_time`).
It names the first bad kernel (`analysis.runtime_faults`: the checked run's, weighed against memcheck's
finding, or memcheck's alone) with the FX nodes fused into it, the user's lines and the fault in plain words,
and returns it (a `RuntimeTriage`: the step's result, which the minifier starts from and the report reads).
Progress goes to the runner's reporter. It never raises for what the script does.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pt2doctor.analysis.failures import asynchronous_cuda_error
from pt2doctor.analysis.runtime_faults import (
    device_assertion,
    first_bad_kernel,
    sanitizer_fault,
    sanitizer_finding,
    with_code,
    with_sanitizer,
)
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.gpu_share import GpuShare
from pt2doctor.diagnose.options import DiagnoseOptions
from pt2doctor.diagnose.runs import VariantRunner
from pt2doctor.diagnose.variants import Variant
from pt2doctor.model import Category, Session
from pt2doctor.model.category_policy import policy
from pt2doctor.model.diagnosis import Attempt
from pt2doctor.model.minify import BackendSpec
from pt2doctor.model.runtime import (
    RuntimeTriage,
    SanitizerFinding,
    read_compiled,
    read_events,
    read_index_checks,
    read_inflight,
)
from pt2doctor.model.serialize import RecordError
from pt2doctor.processes import launch

if TYPE_CHECKING:
    from pt2doctor.diagnose.reproduce import Classified
    from pt2doctor.diagnose.step import Context

# a wrong result whose bad values are NaN or Inf (the script's own check says so, or its assert reads so)
_NONFINITE = re.compile(r"\b(nan|inf|isnan|isinf|isfinite)\b", re.I)
# ... but not `assert_close`'s relative difference, infinite wherever eager's value is zero: finite values
_RELATIVE = re.compile(r"relative difference: (nan|inf)\b", re.I)
_MIN_BUDGET_S = 120.0  # a cold Inductor compile (the FX graph cache is off in this run) on a loaded machine
_BUDGET_FACTOR = 4.0  # the checked run copies inputs and runs graphs eagerly beside them: slower than the original
_SANITIZER_DIRS = ("/usr/local/cuda/bin",)


def wanted(found: Found, on_cuda: bool) -> bool:
    """Inductor's code crashed as it ran, or the result was wrong with NaN/Inf in it, or (on CUDA, where
    compute-sanitizer can see a kernel write past its buffers) wrong at all."""
    if found.original_backend != "inductor" or found.torchrun is not None:  # a job's ranks would share one record
        return False
    return _faulted(found) or (on_cuda and policy(found.category).wrong_result)


def _faulted(found: Found) -> bool:
    """A crash as the compiled code ran, or a wrong result with NaN/Inf in it: what the checked run looks for."""
    failure = found.session.failures[0] if found.session and found.session.failures else None
    if found.category is Category.RUNTIME_CRASH or (failure is not None and asynchronous_cuda_error(failure)):
        return True
    text = _RELATIVE.sub("", "\n".join((failure.message, failure.traceback))) if failure else ""
    return found.category in (Category.ACCURACY, Category.USER_ERROR) and bool(_NONFINITE.search(text))


def budget_s(options: DiagnoseOptions, failed: Attempt) -> float:
    budget = max(_MIN_BUDGET_S, _BUDGET_FACTOR * failed.wall_s)
    return min(budget, options.timeout_s) if options.timeout_s else budget


def triages(ctx: Context, found: Found, classify: Classified) -> bool:
    return wanted(found, classify.on_cuda)


def runtime_triage(ctx: Context, found: Found, classify: Classified) -> RuntimeTriage | None:
    """The step (`diagnose.procedure`): the failing run of `classify` is the one triaged."""
    return triage_runtime(ctx.options, ctx.runner, found, classify.attempt, classify.on_cuda)


def triage_runtime(options: DiagnoseOptions, runner: VariantRunner, found: Found, failed: Attempt,
                   on_cuda: bool) -> RuntimeTriage | None:
    if not wanted(found, on_cuda):
        return None
    budget, started = budget_s(options, failed), time.monotonic()
    where = "CUDA launches blocking, no caching allocator, a sync after every kernel" if on_cuda else "C++ kernels"
    checking = f"re-running with every kernel checked for faults and NaN/Inf ({where}; budget {budget:.0f} s)"
    with found.timed("runtime_triage"):
        finding, pending = None, None
        if _faulted(found):  # the checked run is wanted whatever memcheck says: it runs beside memcheck
            runner.reporter.status(f"runtime triage: {checking}")
            pending = runner.submit(Variant.kernels_checked(options.out_dir, on_cuda, budget))
        if on_cuda:
            runner.reporter.status(f"runtime triage: compute-sanitizer's memcheck on the script "
                                   f"(budget {budget:.0f} s)")
            finding = run_sanitizer(options, budget, runner.call.env, runner.gpu)
            runner.reporter.status(f"runtime triage: {finding.words}")
        if pending is not None or (finding is not None and finding.said == "access"):
            if pending is None:
                runner.reporter.status(f"runtime triage: {checking}")
                pending = runner.submit(Variant.kernels_checked(options.out_dir, on_cuda, budget))
            checked = pending.result()
            found.attempts.append(checked)
            triage = _conclude(runner.run_dir(checked.label), runner.sessions.get(checked.label), checked, budget,
                               started, finding)
        else:  # finite wrong values and no bad access: nothing for the checked run to look for
            said = ("compute-sanitizer found no bad access" if finding is not None and finding.said != "not_run"
                    else "compute-sanitizer did not run")
            triage = RuntimeTriage(sanitizer=finding, seconds=round(time.monotonic() - started, 3), budget_s=budget,
                                   notes=(f"the wrong values are finite and {said}: the kernels were not re-run "
                                          "checked (the checked run looks for faults and NaN/Inf)",))
    fault = triage.fault
    said = fault.words if fault else "no kernel was found at fault"
    runner.reporter.status(f"runtime triage ({triage.seconds:.1f} s): {said}")
    return triage


def triage_flaky(options: DiagnoseOptions, runner: VariantRunner, found: Found, recorded: Attempt,
                 backend: BackendSpec | None, on_cuda: bool) -> RuntimeTriage | None:
    """A flaky failure on CUDA (`recorded`: its recorded run, compiled with `backend`): a kernel reading or
    writing outside its buffers makes runs differ (what it finds or overwrites there changes, and so may whether
    it faults). The triage, compute-sanitizer first, looks for one; what it finds leads the headline and the
    next steps."""
    if not on_cuda or backend is None:
        return None
    found.backend = backend
    return triage_runtime(options, runner, found, recorded, on_cuda)


def _conclude(run_dir: Path, session: Session | None, checked: Attempt, budget: float, started: float,
              finding: SanitizerFinding | None) -> RuntimeTriage:
    notes: list[str] = []
    try:
        compiled, events, checks = read_compiled(run_dir), read_events(run_dir), read_index_checks(run_dir)
    except RecordError as exc:
        compiled, events, checks = [], [], []
        notes.append(f"the kernel checker's records are damaged: {exc}")
    out_of_time = bool(session and session.exit.timed_out)
    ended_by = (checked.signature or "") if checked.outcome == "fail" else ""
    fault = first_bad_kernel(compiled, events, checks, read_inflight(run_dir), ended_by, _assertion(run_dir))
    if finding is not None:
        fault = with_sanitizer(fault, finding) if fault is not None else sanitizer_fault(compiled, finding)
    if out_of_time:
        notes.append(f"the checked run reached its budget ({budget:.0f} s) and was stopped: "
                     "what it found by then is kept")
    if not compiled:
        notes.append("no graph was compiled by Inductor in the checked run")
    notes += [f"graph {c.graph}: its kernels were not checked ({c.note})" for c in compiled if not c.instrumented]
    if fault is None and any(e.kind == "nonfinite" for e in events):
        first = next(e for e in events if e.kind == "nonfinite")
        notes.append(f"kernel {first.kernel} (graph {first.graph}) made NaN/Inf, but the same ops run eagerly do too: "
                     "the non-finite values are the program's own, not the compiler's")
    if checked.outcome == "pass":
        notes.append("the checked run passed (the deterministic re-run does not fail)")
    return RuntimeTriage(fault=fault, sanitizer=finding, seconds=round(time.monotonic() - started, 3),
                         budget_s=budget, out_of_time=out_of_time, run=checked.label, notes=tuple(notes))


def _assertion(run_dir: Path) -> str | None:
    """The device-side assert the checked run printed (CUDA prints it on the process's stderr)."""
    try:
        return device_assertion((run_dir / "stderr.txt").read_text(errors="replace"))
    except OSError:
        return None


def sanitizer_path() -> str | None:
    return shutil.which("compute-sanitizer") or next(
        (str(Path(d) / "compute-sanitizer") for d in _SANITIZER_DIRS if (Path(d) / "compute-sanitizer").exists()), None)


def run_sanitizer(options: DiagnoseOptions, budget: float, env: Mapping[str, str], share: GpuShare
                  ) -> SanitizerFinding:
    """compute-sanitizer's memcheck on the script, run as the user runs it (its path as given, from the user's
    directory, with diagnose's environment for it, `env`), in a slot of the GPU's share (`share.slot()`: beside
    other runs only where the program's measured peak, with the caching allocator, leaves room for two; memcheck's
    run has none, and its peak is not above that), with compile caches of its own: every kernel is compiled and
    autotuned under its eye (an autotuner's trial launch can be the one that writes out of bounds), and the kernel's
    line is read from its source there before the caches are removed."""
    tool = sanitizer_path()
    if tool is None:
        return SanitizerFinding("not_run", "compute-sanitizer is not installed here (not on PATH nor in "
                                           "/usr/local/cuda/bin): the kernel is named by the checked run alone")
    command = [tool, "--tool", "memcheck", "--print-limit", "4", sys.executable, str(options.script), *options.args]
    caches = options.out_dir / "sanitizer"
    _remove(caches)
    try:
        with share.slot():
            ran = launch.run(command, timeout_s=budget,
                             env={**os.environ, **env, "PYTORCH_NO_CUDA_MEMORY_CACHING": "1",
                                  "CUDA_LAUNCH_BLOCKING": "1", **launch.compile_caches_in(caches)})
    except OSError as exc:
        return SanitizerFinding("not_run", f"compute-sanitizer did not start: {exc}")
    try:
        if ran.timed_out:
            return SanitizerFinding("not_run",
                                    f"compute-sanitizer did not finish within the budget ({budget:.0f} s)")
        finding = sanitizer_finding(ran.output)
        return with_code(finding, _source_line(caches, finding.source)) if finding.source else finding
    finally:
        _remove(caches)  # its compiled kernels and autotuning results: no part of the bundle


def _remove(folder: Path) -> None:
    if folder.is_symlink():
        folder.unlink()
    shutil.rmtree(folder, ignore_errors=True)


def _source_line(caches: Path, where: str) -> str:
    """The line `file.py:29` names, in the kernel sources the run compiled into `caches` ("" when not there)."""
    name, _, line = where.rpartition(":")
    try:
        number = int(line)
        path = next(caches.rglob(Path(name).name), None) if number >= 1 else None
        return path.read_text(errors="replace").splitlines()[number - 1].strip() if path else ""
    except (OSError, ValueError, IndexError, NotImplementedError):
        return ""

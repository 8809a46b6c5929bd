"""Reduce the user's program in `diagnose` (`reduce.program`), when no graph gives a verified repro.

Contract: `reduce_the_program(options, found, reporter, failed, backend, reason, export, at_once)` shrinks
`options.script` while it fails as the run `failed` did and passes with the failing part turned off:
under torch.compile with `backend` forced onto it (the stage's simplest backend that fails), on the
export path with the failing `export` step turned off (`reduce.program` says how). It sets
`found.program` and a note; a failure of the reducer is a note too: the diagnosis so far stands. It
does nothing for a diagnosis that has nothing to reduce (the script's own bug, a timeout, a recompile
limit, a failure that does not repeat) or for a job of several ranks. A graph repro that did not
verify is kept beside the program's, as `repro_graph.py`. A verified one with no short form (`reason` "short")
stays repro.py: the program is reduced in `short_program/` of the output directory, and the hand-over makes it
repro.py where it verified (`diagnose.short_repro`). `budget_s`: the reduction's share of the diagnosis's
budget, when it has one (the reducer's own budget otherwise); `pool`: warm workers already open (the diagnosis's),
left open. A Ctrl-C during the reduction is re-raised
once what was reduced is written. `at_once`: how many fresh interpreters of the program may run at once
(the GPU's share, `diagnose.gpu_share`; None: no limit), for the verification runs.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from pt2doctor.capture.runner import Reporter
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.options import DiagnoseOptions
from pt2doctor.model.category_policy import policy
from pt2doctor.model.diagnosis import Attempt, ProgramReason
from pt2doctor.model.export import ExportStep

if TYPE_CHECKING:
    from pt2doctor.processes.fresh_forks import FreshForks
    from pt2doctor.processes.pool import WorkerPool

_WHY = {"dynamo": "the failure is in Dynamo: no graph shows it",
        "fallback": "graph minification gave no verified repro",
        "export": "the failure is in torch.export: no compiled graph shows it",
        "short": "the minimal graph has no short form in PyTorch's idiom that reproduces"}
SHORT_FOLDER = "short_program"  # where the program reduced for a short form is written (`reason` "short")


def reduce_the_program(options: DiagnoseOptions, found: Found, reporter: Reporter, failed: Attempt, backend: str | None,
                       reason: ProgramReason, export: ExportStep | None = None,
                       at_once: int | None = None, budget_s: float | None = None,
                       pool: WorkerPool | None = None, forks: FreshForks | None = None) -> None:
    from pt2doctor.reduce.program import CannotReduce, ProgramJob, fails_as, passes_with, reduce_program
    from pt2doctor.reduce.regression_test import no_test_note

    if not policy(found.category).reduced or found.flaky:
        return
    if options.torchrun is not None:
        found.notes.append("program not reduced: the reducer runs the program as one process, and this one is a job "
                           "of several ranks")
        return
    out_dir = options.out_dir / SHORT_FOLDER if reason == "short" else options.out_dir
    if found.minify is not None and reason != "short":  # an unverified graph repro: kept beside, as repro_graph.py
        graph_repro = Path(found.minify.repro_path)
        if graph_repro.exists():
            found.minify = replace(found.minify,
                                   repro_path=str(graph_repro.replace(graph_repro.with_name("repro_graph.py"))))
    out_dir.mkdir(exist_ok=True)
    job = ProgramJob(options.script, options.args, failed.signature or "", backend, out_dir,
                     min(options.program_budget_s, budget_s or options.program_budget_s), options.query_timeout_s,
                     reason, policy(found.category).wrong_result,
                     script_line(options.script, found), export, options.program_patience,
                     options.program_patience_s if options.program_patience else None, at_once,
                     script_lines(options.script, found), policy(found.category).compiler_raised)
    passes = passes_with(job)
    reporter.status(f"reducing the program ({fails_as(job)}, it must fail as {job.target}"
                    f"{f', {passes} pass' if passes else ''})")
    with found.timed("program_reduction"):
        try:
            found.program = reduce_program(job, reporter, pool, forks)
        except CannotReduce as exc:
            found.notes.append(f"program not reduced: {exc}")
        except Exception as exc:  # the diagnosis so far must survive a reducer failure
            found.notes.append(f"the program reducer failed: {type(exc).__name__}: {exc}")
    p = found.program
    if p is not None:
        found.notes.append(f"{'a short repro' if reason == 'short' else 'repro.py is the program reduced'} "
                           f"({_WHY[reason]}): {p.lines_before} -> {p.lines_after} "
                           f"lines in {p.checks} checks ({p.check_s:.2f} s each), "
                           + ("stopped at its time budget (a line left may not be needed), "
                              if p.stopped_early == "budget" else "") +
                           f"{'verified' if p.verified else 'NOT verified'}")
        if p.verified and p.test is None:
            found.notes.append(no_test_note())
        if p.stopped_early == "interrupted":
            raise KeyboardInterrupt


def script_line(script: Path, found: Found) -> int | None:
    """The line of the script the failure was raised at (the innermost frame in the script's own file)."""
    lines = script_lines(script, found)
    return lines[-1] if lines else None


def script_lines(script: Path, found: Found) -> tuple[int, ...]:
    """The lines of the script's own file in the failing traceback, outermost first."""
    failure = found.session.failures[0] if found.session and found.session.failures else None
    here = str(script.resolve())
    return tuple(f.line for f in failure.user_frames if f.file and f.line and str(Path(f.file).resolve()) == here
                 ) if failure else ()

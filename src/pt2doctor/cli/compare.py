"""`pt2doctor compare A B` (what changed between two runs) and `pt2doctor check SCRIPT` (a CI gate).

A and B, and check's `--baseline`, are anything `report` reads: a run directory, a session.json, a
TORCH_TRACE file or directory; or two jobs' directories (`run --nproc-per-node`), compared rank by rank.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from pt2doctor.analysis.compare import compare, new_since, over_budget
from pt2doctor.analysis.job_compare import compare_jobs
from pt2doctor.analysis.verdict import judged_exit_code
from pt2doctor.capture.runner import RunOptions, run_script
from pt2doctor.cli.options import SCRIPT_COMMAND, SECONDS, run_options, script_arguments
from pt2doctor.cli.output import emit_report, input_errors, load_session, write_html
from pt2doctor.cli.progress import TerminalReporter
from pt2doctor.cli.run import default_out_dir
from pt2doctor.model import Session
from pt2doctor.model.compare import Budget
from pt2doctor.model.exit_codes import ExitCode
from pt2doctor.model.job import Job
from pt2doctor.model.serialize import dumps
from pt2doctor.report.compare import overruns_in_brief, render_check, render_comparison, render_job_comparison
from pt2doctor.report.document import ReportInputError, build_report, read_job_json, save_report, session_json_of
from pt2doctor.report.gate import render_gate


@click.command("compare", short_help="What changed between two runs (or two ranks).",
               epilog="Exit status: 0 no differences, 1 differences, 64 an input is not a run, session or trace.",
               context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.argument("a", type=click.Path(path_type=Path))
@click.argument("b", type=click.Path(path_type=Path))
def compare_command(as_json: bool, a: Path, b: Path) -> int:
    """Compare A with B: frames and graphs, graph breaks, recompiles and their causes, compile time,
    caches, failures and accuracy verdicts. Two jobs (`run --nproc-per-node`) are compared rank by rank."""
    jobs = _job(a), _job(b)
    if jobs[0] is not None and jobs[1] is not None:
        by_rank = compare_jobs(jobs[0], jobs[1], (str(a), str(b)))
        click.echo(dumps(by_rank, pretty=True).decode() if as_json else render_job_comparison(by_rank),
                   nl=not as_json)
        return ExitCode.OK if by_rank.same else ExitCode.DIFFERENT
    if jobs[0] is not None or jobs[1] is not None:
        raise click.UsageError(f"{a if jobs[0] is not None else b} is a job of several ranks and the other is one "
                               "process: compare a job with a job (rank by rank), or one rank's run with a run")
    comparison = compare(_load(a), _load(b), (str(a), str(b)))
    click.echo(dumps(comparison, pretty=True).decode() if as_json else render_comparison(comparison), nl=not as_json)
    return ExitCode.OK if comparison.same else ExitCode.DIFFERENT


@click.command("check", context_settings=SCRIPT_COMMAND, short_help="Run SCRIPT and fail when it is over budget.",
               epilog="Exit status: 0 within budget, 1 over budget or new graph breaks/recompiles since --baseline, "
                      "4 the script itself failed (nothing judged; its status is in --json), 124 it was stopped at "
                      "--timeout, 130 Ctrl-C, 64 usage error. The first line says which.")
@run_options
@click.option("--max-graph-breaks", type=click.IntRange(min=0), default=None, help="Graph breaks allowed.")
@click.option("--max-recompiles", type=click.IntRange(min=0), default=None, help="Recompiles allowed.")
@click.option("--max-compile-time", type=SECONDS, default=None, help="Seconds of compilation allowed.")
@click.option("--baseline", type=click.Path(path_type=Path), default=None,
              help="A earlier run (directory, session.json or trace): fail on breaks or recompiles it did not have.")
@script_arguments
def check_command(out_dir: Path | None, timeout: float | None, as_json: bool, strict: bool, html: bool,
                  max_graph_breaks: int | None, max_recompiles: int | None, max_compile_time: float | None,
                  baseline: Path | None, script: Path, args: tuple[str, ...]) -> int:
    """Run SCRIPT as `run` does, then hold it against the budgets and/or a baseline run."""
    budget = Budget(max_graph_breaks, max_recompiles, max_compile_time)
    if budget == Budget() and baseline is None:
        raise click.UsageError("give at least one budget (--max-graph-breaks, --max-recompiles, --max-compile-time) "
                               "or --baseline")
    before = _load(baseline) if baseline is not None else None  # a bad baseline is found before the script runs
    options = RunOptions(script=script, args=args, out_dir=out_dir or default_out_dir(script, "check"),
                         timeout_s=timeout, stdout_to_stderr=True, strict=strict)
    with input_errors():
        session = run_script(options, TerminalReporter(quiet=False))
    saved = options.out_dir / "session.json"
    overruns = over_budget(session, budget) + (new_since(before, session) if before is not None else ())
    against = " and ".join(filter(None, ("the budget" if budget != Budget() else "",
                                         f"the baseline {baseline}" if baseline is not None else "")))
    # a budget says nothing about a crash: the script's own failure is judged on nothing
    code = judged_exit_code(session, bool(overruns), wrong_first=False)
    report = build_report(session)
    save_report(report, saved)
    gate = render_gate("check", code, wrong=f"OVER {against}: {overruns_in_brief(overruns)}",
                       right=f"within {against}", script=report.verdict.headline)
    if as_json:
        click.echo(gate, err=True, nl=False)
        sys.stdout.buffer.write(dumps({"exit_code": code, "overruns": overruns, "script_exit_code": session.exit.code,
                                       "run_dir": str(options.out_dir)}, pretty=True) + b"\n")
    else:
        click.echo(gate, nl=False)
        emit_report(report)
        click.echo(render_check(overruns, against), nl=False)
    if html:
        click.echo(f"pt2doctor: wrote {write_html(report, options.out_dir / 'report.html')}", err=True)
    return code


def _job(path: Path) -> Job | None:
    """The job a run directory or session.json of `run --nproc-per-node` holds; None for anything else."""
    saved = session_json_of(path) if path.exists() else None
    try:
        return read_job_json(saved) if saved is not None else None
    except ReportInputError as exc:
        raise click.UsageError(str(exc)) from exc


def _load(path: Path) -> Session:
    try:
        with input_errors():
            return load_session(path)
    except ReportInputError as exc:
        raise click.UsageError(str(exc)) from exc

"""`pt2doctor report PATH [--html [-o FILE]]`: re-render a saved run, or explain any TORCH_TRACE file or directory.

`--html` writes one self-contained page: to FILE, else into PATH when PATH is a run directory,
else `./report.html`.
"""

from __future__ import annotations

from pathlib import Path

import click

from pt2doctor.capture.trace.trace_reader import trace_files
from pt2doctor.cli.output import emit, input_errors, load_session, write_html
from pt2doctor.model.exit_codes import ExitCode
from pt2doctor.model.job import Job
from pt2doctor.report.document import ReportInputError, read_job_json, session_json_of


@click.command("report", short_help="Re-render a run, a diagnosis or any trace.",
               epilog="Exit status: 0 the input was read, 64 not a session, diagnosis or trace, 65 --strict and the "
                      "trace has unreadable lines.", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of the summary.")
@click.option("--strict", is_flag=True, help="Fail on unreadable trace lines instead of skipping them.")
@click.option("--html", "html", is_flag=True, help="Also write an HTML report (see -o).")
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Where --html writes (implies --html).")
@click.argument("paths", type=click.Path(path_type=Path), nargs=-1, required=True, metavar="PATH...")
def report_command(as_json: bool, strict: bool, html: bool, output: Path | None, paths: tuple[Path, ...]) -> int:
    """Render PATH: a run directory, a diagnose directory, a session.json, or a TORCH_TRACE file/directory. Several
    PATHs are the parts of one job, side by side: each a run directory of `run -- torchrun ...` on one node (a job of
    several agents: one pt2doctor per node, each writing its own ranks)."""
    if len(paths) > 1:
        return _report_nodes(paths, as_json, strict, output or (Path("report.html") if html else None))
    path = paths[0]
    if path.is_dir() and (path / "diagnosis.json").is_file():
        return _report_diagnosis(path, as_json, html or output is not None, output)
    saved = session_json_of(path) if path.exists() else None
    job = read_job_json(saved) if saved is not None else None
    several = saved is None and path.is_dir() and len(trace_files(path)) > 1
    if job is not None:
        return _report_processes(path, job, as_json, strict, output or (_html_path(path) if html else None))
    if several and not (html or output is not None):  # the page shows the traces' ranks side by side itself
        return _report_processes(path, job, as_json, strict, None)
    try:
        with input_errors():
            session = load_session(path, strict=strict)
    except ReportInputError as exc:
        raise click.UsageError(str(exc)) from exc
    report = emit(session, as_json=as_json)
    if html or output is not None:
        click.echo(f"pt2doctor: wrote {write_html(report, output or _html_path(path))}", err=True)
    if strict and session.trace.unreadable:
        return ExitCode.DATA
    return ExitCode.OK


def _report_processes(path: Path, saved: Job | None, as_json: bool, strict: bool, page: Path | None) -> int:
    """A job run with --nproc-per-node, or traces of several processes (the ranks of a job, copied from a
    cluster): one session per process, side by side, and how each departs from the lowest rank; with `page`,
    the job's HTML page too."""
    from pt2doctor.analysis.ranks import job_of
    from pt2doctor.capture.trace.trace_import import process_sessions
    from pt2doctor.model.serialize import dumps
    from pt2doctor.report.ranks import render_job

    job = job_of(saved.processes, saved.command, saved.exit) if saved else job_of(process_sessions(path, strict=strict))
    click.echo(dumps(job, pretty=True).decode() if as_json else render_job(job), nl=not as_json)
    if page is not None:
        from pt2doctor.report.html_job import write_job_html

        click.echo(f"pt2doctor: wrote {write_job_html(job, page)}", err=True)
    unreadable = any(p.session.trace.unreadable for p in job.processes)
    return ExitCode.DATA if strict and unreadable else ExitCode.OK


def _report_nodes(paths: tuple[Path, ...], as_json: bool, strict: bool, page: Path | None) -> int:
    """The run directories of one job's agents (one per node) as one job: every rank side by side, each compared
    with the lowest; the job ended as its first agent that failed did."""
    jobs: list[Job] = []
    for path in paths:
        saved = session_json_of(path) if path.exists() else None
        job = read_job_json(saved) if saved is not None else None
        if job is None:
            raise click.UsageError(f"{path} is not the run directory of a job (`run -- torchrun ...` or "
                                   "`run --nproc-per-node N`): several PATHs are the parts of one job")
        jobs.append(job)
    processes = tuple(sorted((p for job in jobs for p in job.processes),
                             key=lambda p: (p.rank is None, p.rank if p.rank is not None else 0, p.label)))
    ended = next((job.exit for job in jobs if not job.exit.ok), jobs[0].exit)
    return _report_processes(paths[0], Job(jobs[0].schema, jobs[0].command, ended, processes), as_json, strict, page)


def _html_path(path: Path) -> Path:
    return path / "report.html" if (path / "session.json").is_file() else Path("report.html")


def _report_diagnosis(path: Path, as_json: bool, html: bool, output: Path | None) -> int:
    """A `diagnose` directory: its summary (or diagnosis.json), and the page with the diagnosis section."""
    from rich.console import Console

    from pt2doctor.cli.diagnose import print_diagnosis
    from pt2doctor.model.serialize import dumps
    from pt2doctor.report.issue import load_bundle, write_diagnosis_html

    try:
        diagnosis, session = load_bundle(path)
    except ReportInputError as exc:
        raise click.UsageError(str(exc)) from exc
    if as_json:
        click.echo(dumps(diagnosis, pretty=True).decode())
    else:
        print_diagnosis(Console(stderr=False, highlight=False), diagnosis, [])
    if html:
        if session is None:
            raise click.UsageError(f"{path} has no runs/original-1/session.json to draw the page from")
        from pt2doctor.capture.report_inputs import collect_html_inputs

        page = write_diagnosis_html(diagnosis, session, output or path / "report.html", collect_html_inputs(session))
        click.echo(f"pt2doctor: wrote {page}", err=True)
    return ExitCode.OK

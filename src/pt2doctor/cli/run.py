"""`pt2doctor run [--out DIR] [--timeout S] [--json] [--html] SCRIPT [ARGS...]`.

With `--record`, `PT2DOCTOR_RECORD_ACCURACY=TOL` in the environment also has the recorder judge each
graph's first call against eager (fp64-referenced, `capture.child.graph_recorder`): a switch for the
minifier's users and tests, read here once and handed to the child in its spec.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from pt2doctor.analysis.ranks import job_of
from pt2doctor.analysis.verdict import exit_code_of
from pt2doctor.capture.runner import RunOptions, run_job, run_script, save
from pt2doctor.cli.options import RUN_EXIT_CODES, SCRIPT_COMMAND, SCRIPT_FORMS, run_options, script_arguments
from pt2doctor.cli.output import emit, input_errors, write_html
from pt2doctor.cli.progress import TerminalReporter
from pt2doctor.model.child import Hooks
from pt2doctor.model.serialize import dumps
from pt2doctor.model.settings import settings
from pt2doctor.report.advice import render_cold
from pt2doctor.report.html_job import write_job_html
from pt2doctor.report.ranks import render_job
from pt2doctor.workflows import cold as _cold


def default_out_dir(script: Path, label: str = "run") -> Path:
    return Path("pt2doctor-runs") / f"{script.stem}-{label}-{time.strftime('%Y%m%d-%H%M%S')}"


@click.command("run", context_settings=SCRIPT_COMMAND, short_help="Run SCRIPT and explain its compilation.",
               help="Run SCRIPT as `python SCRIPT ARGS` would, and explain its compilation.\n\n" + SCRIPT_FORMS,
               epilog=RUN_EXIT_CODES)
@run_options
@click.option("--record", is_flag=True, help="Also record compiled graphs for `pt2doctor minify`.")
@click.option("--cold", is_flag=True, help="Also measure cold compile (caches off) against warm, per frame and phase.")
@click.option("--nproc-per-node", type=click.IntRange(min=1), default=None,
              help="Run SCRIPT as a job of N ranks through torch.distributed.run (standalone), one session per rank.")
@script_arguments
def run_command(out_dir: Path | None, timeout: float | None, as_json: bool, strict: bool, record: bool, cold: bool,
                html: bool, nproc_per_node: int | None,
                script: Path, args: tuple[str, ...]) -> int:
    """Run SCRIPT as `python SCRIPT ARGS` would, and explain its compilation."""
    hooks = Hooks(record_accuracy_tolerance=settings().record_accuracy)
    torchrun, script, args = torchrun_of(nproc_per_node, script, args)
    options = RunOptions(script=script, args=args, out_dir=out_dir or default_out_dir(script), timeout_s=timeout,
                         record_graphs=record, hooks=hooks, stdout_to_stderr=as_json, strict=strict, torchrun=torchrun)
    if torchrun is not None:
        if record or cold:
            raise click.UsageError("--record and --cold are for one process, not for a job of several ranks")
        return _run_job(options, as_json, html)
    options = _cold.with_private_cache(options) if cold else options
    with input_errors():
        session = run_script(options, TerminalReporter(quiet=False))
    report = emit(session, as_json=as_json, save_to=options.out_dir / "session.json")
    if cold:
        click.echo(render_cold(_cold.measure(options, TerminalReporter(quiet=False))), err=as_json)
    if html:
        click.echo(f"pt2doctor: wrote {write_html(report, options.out_dir / 'report.html')}", err=True)
    return report.verdict.exit_code


def torchrun_of(nproc_per_node: int | None, script: Path,
                args: tuple[str, ...]) -> tuple[tuple[str, ...] | None, Path, tuple[str, ...]]:
    """torchrun's flags (None: one process), the script and its arguments, from `--nproc-per-node N SCRIPT` or
    `-- torchrun [FLAGS] SCRIPT [ARGS]`."""
    if script.name == "torchrun" and not script.exists():
        return split_torchrun(args)
    return (f"--nproc-per-node={nproc_per_node}", "--standalone") if nproc_per_node else None, script, args


def split_torchrun(argv: tuple[str, ...]) -> tuple[tuple[str, ...], Path, tuple[str, ...]]:
    """torchrun's own flags, the script (the first `.py` argument) and the script's arguments."""
    at = next((i for i, arg in enumerate(argv) if arg.endswith(".py") and not arg.startswith("-")), None)
    if at is None or "-m" in argv[:at] or "--module" in argv[:at]:
        raise click.UsageError("after `torchrun`, give its flags and then a Python script (SCRIPT.py [ARGS]); "
                               "a module (-m) is not supported")
    return argv[:at], Path(argv[at]), argv[at + 1:]


def _run_job(options: RunOptions, as_json: bool, html: bool) -> int:
    with input_errors():
        ran = run_job(options, TerminalReporter(quiet=False))
    job = job_of(ran.processes, ran.command, ran.exit)
    save(job, options.out_dir / "session.json")
    click.echo(dumps(job, pretty=True).decode() if as_json else render_job(job), nl=not as_json)
    if html:
        click.echo(f"pt2doctor: wrote {write_job_html(job, options.out_dir / 'report.html')}", err=True)
    return exit_code_of(job.exit)

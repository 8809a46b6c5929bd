"""`pt2doctor accuracy [--tol T] [--backend B] [--out --timeout --json --html --strict] SCRIPT [ARGS...]`.

Parsing and dispatch only: the work is `api.accuracy.check_accuracy`, the meaning
`analysis.accuracy`, the text `report.accuracy`. Exit status: the script's own failure first
(as `run`), else 1 when a graph's compiled results differ from eager beyond PyTorch's fp64-referenced
tolerance without a known non-bug explaining it, else 0.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from pt2doctor.capture.runner import RunOptions
from pt2doctor.cli.output import SECONDS, input_errors
from pt2doctor.cli.progress import TerminalReporter
from pt2doctor.cli.run import default_out_dir


@click.command("accuracy", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--tol", "tolerance", type=float, default=1e-4, show_default=True, help="Tolerance of PyTorch's accuracy rule.")
@click.option("--backend", default=None, help="Compile every torch.compile call with this backend instead.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), help="Run directory (session.json, trace).")
@click.option("--timeout", type=SECONDS, default=None, help="Stop the script after this many seconds.")
@click.option("--json", "as_json", is_flag=True, help="Print the session JSON (with its `accuracy` list).")
@click.option("--html", "html", is_flag=True, help="Also write DIR/report.html (one self-contained page).")
@click.option("--strict", is_flag=True, help="Fail on unreadable trace lines instead of skipping them.")
@click.option("--no-minify", "no_minify", is_flag=True, help="Do not minify the first failing graph.")
@click.option("--jobs", type=int, default=os.cpu_count() or 1, show_default=True, help="Minifier candidates run in parallel.")
@click.argument("script", type=click.Path(path_type=Path))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def accuracy_command(tolerance: float, backend: str | None, out_dir: Path | None, timeout: float | None,
                     as_json: bool, html: bool, strict: bool, no_minify: bool, jobs: int, script: Path,
                     args: tuple[str, ...]) -> int:
    """Compare every compiled graph of SCRIPT with eager against an fp64 reference; find the first divergent op."""
    from pt2doctor.api.accuracy import AccuracyOptions, check_accuracy
    from pt2doctor.cli.output import emit
    from pt2doctor.report.accuracy import render_accuracy

    run = RunOptions(script=script, args=args, out_dir=out_dir or default_out_dir(script, "accuracy"),
                     timeout_s=timeout, stdout_to_stderr=as_json, strict=strict, label="accuracy")
    options = AccuracyOptions(run, tolerance, backend, minify=not no_minify, jobs=jobs)
    with input_errors():
        session = check_accuracy(options, TerminalReporter(quiet=False))
    report = emit(session, as_json=as_json, save_to=run.out_dir / "session.json")  # text includes the accuracy
    if as_json:
        click.echo(render_accuracy(session.accuracy), err=True)
    if html:
        from pt2doctor.cli.output import write_html

        click.echo(f"pt2doctor: wrote {write_html(report, run.out_dir / 'report.html')}", err=True)
    sys.stdout.flush()
    return report.verdict.exit_code

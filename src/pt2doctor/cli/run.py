"""`pt2doctor run [--out DIR] [--timeout S] [--json] [--html] SCRIPT [ARGS...]`.

With `--record`, `PT2DOCTOR_RECORD_ACCURACY=TOL` in the environment also has the recorder judge each
graph's first call against eager (fp64-referenced, `capture.child.graph_recorder`): a switch for the
minifier's users and tests, read here once and handed to the child in its spec.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import click

from pt2doctor.workflows import cold as _cold
from pt2doctor.capture.runner import RunOptions, run_script
from pt2doctor.cli.options import RUN_EXIT_CODES, SCRIPT_COMMAND, run_options, script_arguments
from pt2doctor.cli.output import emit, input_errors, write_html
from pt2doctor.cli.progress import TerminalReporter
from pt2doctor.model.child import Hooks
from pt2doctor.report.advice import render_cold


def default_out_dir(script: Path, label: str = "run") -> Path:
    return Path("pt2doctor-runs") / f"{script.stem}-{label}-{time.strftime('%Y%m%d-%H%M%S')}"


@click.command("run", context_settings=SCRIPT_COMMAND, short_help="Run SCRIPT and explain its compilation.",
               epilog=RUN_EXIT_CODES)
@run_options
@click.option("--record", is_flag=True, help="Also record compiled graphs for `pt2doctor minify`.")
@click.option("--cold", is_flag=True, help="Also measure cold compile (caches off) against warm, per frame and phase.")
@script_arguments
def run_command(out_dir: Path | None, timeout: float | None, as_json: bool, strict: bool, record: bool, cold: bool,
                html: bool,
                script: Path, args: tuple[str, ...]) -> int:
    """Run SCRIPT as `python SCRIPT ARGS` would, and explain its compilation."""
    tolerance = os.environ.get("PT2DOCTOR_RECORD_ACCURACY")
    hooks = Hooks(record_accuracy_tolerance=float(tolerance) if tolerance else None)
    options = RunOptions(script=script, args=args, out_dir=out_dir or default_out_dir(script), timeout_s=timeout,
                         record_graphs=record, hooks=hooks, stdout_to_stderr=as_json, strict=strict)
    options = _cold.with_private_cache(options) if cold else options
    with input_errors():
        session = run_script(options, TerminalReporter(quiet=False))
    report = emit(session, as_json=as_json, save_to=options.out_dir / "session.json")
    if cold:
        click.echo(render_cold(_cold.measure(options, TerminalReporter(quiet=False))), err=as_json)
    if html:
        click.echo(f"pt2doctor: wrote {write_html(report, options.out_dir / 'report.html')}", err=True)
    return report.verdict.exit_code

"""`pt2doctor demo`: the troubleshooting guide's examples, run and explained."""

from __future__ import annotations

import tempfile
from importlib import resources
from pathlib import Path

import click

from pt2doctor.capture.runner import RunOptions, run_script
from pt2doctor.cli.options import OutDir
from pt2doctor.cli.output import emit
from pt2doctor.cli.progress import TerminalReporter
from pt2doctor.model.exit_codes import ExitCode

EXAMPLES = (
    ("toy_example.py", "graph breaks: print() and a data-dependent `if`"),
    ("recompiles.py", "recompilations: changing shapes, dtypes and a Python int"),
    ("custom_backend_failure.py", "a custom backend that fails on one op"),
)


@click.command("demo", short_help="Run the troubleshooting guide's examples.")
@click.option("--out", "out_dir", type=OutDir(), default=None,
              help="Where to keep the runs (default: a temporary directory).")
def demo_command(out_dir: Path | None) -> int:
    """Run the built-in examples from PyTorch's troubleshooting guide and explain each."""
    root = out_dir or Path(tempfile.mkdtemp(prefix="pt2doctor-demo-"))
    reporter = TerminalReporter()
    for name, what in EXAMPLES:
        click.secho(f"\n=== demo: {name} — {what}", bold=True)
        with resources.as_file(resources.files("pt2doctor.examples") / name) as script:
            session = run_script(RunOptions(script=Path(script), out_dir=root / Path(name).stem, timeout_s=300),
                                 reporter)
        emit(session, as_json=False, save_to=root / Path(name).stem / "session.json")
    _diagnose_demo(root)
    click.secho(f"\nDemo runs kept in {root}", dim=True)
    return ExitCode.OK


def _diagnose_demo(root: Path) -> None:
    """The main job: `diagnose` on the failing example (stage table, minimal verified repro, issue.md)."""
    from pt2doctor.cli.diagnose import run_diagnosis

    name = "custom_backend_failure.py"
    click.secho(f"\n=== demo: pt2doctor diagnose {name} — the guide's whole procedure, automated", bold=True)
    with resources.as_file(resources.files("pt2doctor.examples") / name) as script:
        run_diagnosis(Path(script), (), out=root / "diagnose", timeout=300)

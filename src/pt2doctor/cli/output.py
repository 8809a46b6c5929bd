"""Shared output steps of the subcommands: save the enriched report, print it, pick the exit code."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from pt2doctor.model import Session
from pt2doctor.report.document import Report, build_report, save_report, to_json_bytes
from pt2doctor.report.terminal import render_terminal


def emit(session: Session, *, as_json: bool, save_to: Path | None = None) -> Report:
    report = build_report(session)
    if save_to is not None:
        save_report(report, save_to)
    if as_json:
        sys.stdout.buffer.write(to_json_bytes(report) + b"\n")
        sys.stdout.flush()
    else:
        color = sys.stdout.isatty()
        click.echo(render_terminal(report, color=color, width=_width()), nl=False)
    return report


def _width() -> int:
    import shutil

    return max(80, min(shutil.get_terminal_size((110, 24)).columns, 160))

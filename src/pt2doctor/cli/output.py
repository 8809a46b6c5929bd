"""Shared steps of the subcommands: save the enriched report, print it, pick the exit code; what a
script that cannot run or a trace that cannot be read becomes (`input_errors`)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from pt2doctor.analysis.verdict import EXIT_DATA
from pt2doctor.capture.runner import ScriptError
from pt2doctor.capture.trace_reader import TraceError
from pt2doctor.model import Session
from pt2doctor.report.document import Report, build_report, save_report, to_json_bytes
from pt2doctor.report.terminal import render_terminal

SECONDS = click.FloatRange(min=0, min_open=True)  # a --timeout: a positive number of seconds


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


class UnreadableTrace(click.ClickException):
    exit_code = EXIT_DATA


@contextmanager
def input_errors() -> Iterator[None]:
    """A script that cannot be run (missing, not Python) is a usage error (exit 64); a trace that
    cannot be read under --strict exits 65 (EXIT_DATA), whichever command read it."""
    try:
        yield
    except ScriptError as exc:
        raise click.UsageError(str(exc)) from exc
    except TraceError as exc:
        raise UnreadableTrace(f"unreadable trace (--strict): {exc}") from exc


def _width() -> int:
    import shutil

    return max(80, min(shutil.get_terminal_size((110, 24)).columns, 160))

"""Shared steps of the subcommands: save the enriched report, print it, pick the exit code; what a
script that cannot run or a trace that cannot be read becomes (`input_errors`)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console

from pt2doctor.capture.run_lock import DirectoryBusy
from pt2doctor.capture.runner import ScriptError
from pt2doctor.capture.trace.trace_reader import TraceError
from pt2doctor.model import Session
from pt2doctor.model.exit_codes import ExitCode
from pt2doctor.report.document import (
    Report,
    ReportInputError,
    build_report,
    read_session_json,
    save_report,
    session_json_of,
    to_json_bytes,
)
from pt2doctor.report.terminal import render_terminal

UNWRAPPED = 100_000  # the width that keeps every line whole


def emit(session: Session, *, as_json: bool, save_to: Path | None = None) -> Report:
    report = build_report(session)
    if save_to is not None:
        save_report(report, save_to)
    emit_report(report, as_json=as_json)
    return report


def summary_console(*, as_json: bool = False) -> Console:
    """Where every command prints its summary: stdout, the stream of results (progress, warnings and
    `wrote` notes go to stderr); stderr when --json gives stdout to the JSON record."""
    return Console(stderr=as_json, highlight=False)


def emit_report(report: Report, *, as_json: bool = False) -> None:
    """A report on stdout: JSON, or the terminal text."""
    if as_json:
        sys.stdout.buffer.write(to_json_bytes(report) + b"\n")
        sys.stdout.flush()
    else:
        tty = sys.stdout.isatty()
        # a log or a file is read in an editor or a CI page that wraps by itself: never hard-wrap there
        click.echo(render_terminal(report, color=tty, width=_width() if tty else UNWRAPPED), nl=False)


def load_session(path: Path, *, strict: bool = False) -> Session:
    """A saved session.json, a run directory, or any TORCH_TRACE file or directory, as a Session."""
    if not path.exists():
        raise ReportInputError(f"no such file or directory: {path}")
    session_file = session_json_of(path)
    if session_file is not None:
        from pt2doctor.capture.trace.guard_text import reparsed

        return reparsed(read_session_json(session_file))  # an older session.json: its guard facts from torch's text
    from pt2doctor.capture.trace.trace_import import session_from_trace

    session = session_from_trace(path, strict=strict)
    if session.trace.files and not session.trace.lines:
        raise ReportInputError(f"{path} is empty: no trace lines (was the run stopped before torch wrote any?)")
    if not session.trace.files:
        raise ReportInputError(f"{path} holds no session.json and no TORCH_TRACE *.log files")
    if not session.trace.events and session.trace.unreadable:
        raise ReportInputError(f"{path} is not a TORCH_TRACE: none of its {session.trace.unreadable} line(s) is a "
                               "trace line")
    return session


def write_html(report: Report, path: Path) -> Path:
    """`report.html` for the report, with the trace artifacts and source lines capture reads for it."""
    from pt2doctor.capture.report_inputs import collect_html_inputs
    from pt2doctor.report.html import write_html_report

    return write_html_report(report, path, collect_html_inputs(report.session))


class UnreadableTrace(click.ClickException):
    exit_code = ExitCode.DATA


@contextmanager
def input_errors() -> Iterator[None]:
    """A script that cannot be run (missing, not Python) is a usage error (exit 64); a trace that
    cannot be read under --strict exits 65 (`ExitCode.DATA`), whichever command read it."""
    try:
        yield
    except (ScriptError, DirectoryBusy) as exc:
        raise click.UsageError(str(exc)) from exc
    except TraceError as exc:
        raise UnreadableTrace(f"unreadable trace (--strict): {exc}") from exc


def _width() -> int:
    import shutil

    return max(80, min(shutil.get_terminal_size((110, 24)).columns, 160))

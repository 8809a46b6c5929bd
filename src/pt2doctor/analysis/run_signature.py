"""The failure signature of a finished `python repro.py`, from its exit status and output alone.

Contract: `run_signature(returncode, stdout, stderr)` is None when the run passed (exit 0), else the
failure's normalised identity, by the rules every other run of pt2doctor's is judged by:
- a repro that describes its own failure (`model.signature.FAILURE_MARKER`, written by the minifier's and
  the program reducer's harnesses) and a run that died of a signal: `model.signature.from_exit`;
- an uncaught exception (the short form of repro.py, a user's script): its type and message as Python
  printed them, read from the last traceback, then `analysis.failures.failure_text`, the identity of a
  failure a run records; where the exception was raised outside the compiler (the script's own check of
  a wrong result) only the parts of its first line that name no values (`model.signature.check_identity`,
  as the program harness judges a wrong result), since the wrong values change from release to release;
- anything else: `exit status N`.
Pure: no runs, no torch. The output is read, never searched for a substring of an expected error.
"""

from __future__ import annotations

import re

from pt2doctor.analysis.failures import failure_text, raised_inside_compiler
from pt2doctor.model.signature import FAILURE_MARKER, check_identity, from_exit

_TRACEBACK = "Traceback (most recent call last):"
_EXCEPTION_LINE = re.compile(r"([A-Za-z_][\w.]*)(?::\s?(.*))?$")


def run_signature(returncode: int, stdout: str, stderr: str) -> str | None:
    output = stdout + stderr
    told = from_exit(returncode, output)
    if told is None or returncode < 0 or FAILURE_MARKER in output:
        return told.text if told is not None else None
    raised = uncaught_exception(stderr)
    if raised is None:
        return told.text
    exception, message, frames = raised
    text = failure_text(exception, message)
    return text if raised_inside_compiler(frames) else check_identity(text)


def uncaught_exception(stderr: str) -> tuple[str, str, str] | None:
    """(the exception's qualified type, its message, the frames of its traceback) of the last traceback
    Python printed; None when there is none, or it does not end in an exception line."""
    _, marker, block = stderr.rpartition(_TRACEBACK)
    if not marker:
        return None
    lines = block.splitlines()[1:]
    at = next((i for i, line in enumerate(lines) if line and not line[0].isspace()), None)
    if at is None:
        return None
    match = _EXCEPTION_LINE.match(lines[at])
    if match is None:
        return None
    message = "\n".join([match.group(2) or "", *lines[at + 1:]]).strip()
    return match.group(1), message, "\n".join(lines[:at])

"""The first line of a command that judges a run (`check`: a budget; `accuracy`: the compiled graphs' results): what
its exit status means, in words, so a CI log says at its top which of them happened. Pure: the status was decided
by `analysis.verdict.judged_exit_code`, the judgement's words by the command's analysis."""

from __future__ import annotations

from pt2doctor.model.exit_codes import ExitCode


def render_gate(command: str, code: int, *, wrong: str, right: str, script: str) -> str:
    """`wrong` / `right`: the judgement; `script`: how the script itself ended (the run's verdict line)."""
    if code == ExitCode.SCRIPT_FAILED:
        return f"{command}: THE SCRIPT FAILED, nothing was judged (exit {code}): {script}\n"
    if code in (ExitCode.TIMEOUT, ExitCode.INTERRUPTED):
        return f"{command}: nothing was judged (exit {code}): {script}\n"
    if code == ExitCode.DIFFERENT:
        return f"{command}: {wrong} (exit {code})\n"
    return f"{command}: {right}\n"

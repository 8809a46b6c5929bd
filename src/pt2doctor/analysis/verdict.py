"""The one-line verdict of a run and the process exit code that mirrors it.

Exit codes (docs/reference/exit-codes.md): 0 the script succeeded; the script's own code when it exited
non-zero; 128+N when it died of signal N; 124 on timeout; 130 when interrupted. pt2doctor's own
usage errors exit 64 and an unreadable input under --strict exits 65. After `pt2doctor accuracy`, a
script that succeeded but has a graph with unexplained wrong results exits 1 (`ExitCode.MISMATCH`). Commands that
judge a run (`check`, `accuracy`) exit by `judged_exit_code` instead. The codes are `model.exit_codes.ExitCode`.
"""

from __future__ import annotations

from pt2doctor.analysis.accuracy import any_wrong
from pt2doctor.analysis.accuracy import headline as accuracy_headline
from pt2doctor.analysis.coverage import compiled_little
from pt2doctor.analysis.failures import caught_compile_failure, described, first_message_line
from pt2doctor.model import Category, ExitInfo, Session, Verdict
from pt2doctor.model.exit_codes import ExitCode
from pt2doctor.model.export import STEP_TITLES
from pt2doctor.model.export_draft import failed_checks


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters at a word boundary, with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "…"


def exit_code(session: Session) -> int:
    return exit_code_of(session.exit)


def exit_code_of(e: ExitInfo) -> int:
    """The status pt2doctor exits with for a process (or a whole job) that ended as `e` did."""
    if e.timed_out:
        return ExitCode.TIMEOUT
    if e.interrupted:
        return ExitCode.INTERRUPTED
    if e.signal:
        return 128 + e.signal
    return e.code if e.code is not None else ExitCode.OK


def judged_exit_code(session: Session, wrong: bool, *, wrong_first: bool) -> int:
    """The status of a command that judges a run (`check` a budget, `accuracy` the graphs' results), so a CI job can
    branch on which happened: the script stopped at its timeout (124) or by Ctrl-C (130) as always; judged `wrong`
    (1); the script itself failed, exit N or a signal (`ExitCode.SCRIPT_FAILED`, 4); else 0. `wrong_first`: a
    judgement made before the script failed stands (accuracy: a wrong graph is why the script's own check then
    failed); otherwise a failed script is judged on nothing (check: a budget says nothing about a crash)."""
    ended = session.exit
    if ended.timed_out or ended.interrupted:
        return exit_code_of(ended)
    if wrong and (wrong_first or ended.ok):
        return ExitCode.DIFFERENT
    return ExitCode.OK if ended.ok else ExitCode.SCRIPT_FAILED


def verdict_for(session: Session) -> Verdict:
    code = exit_code(session)
    from_trace = session.exit.code is None and session.exit.signal is None and not session.exit.timed_out
    failed = not session.exit.ok and not from_trace
    failure = session.failures[0] if session.failures and (failed or from_trace) else None
    if session.exit.interrupted:  # the user's Ctrl-C: not a failure of the script or the compiler
        where = f" at {failure.file}:{failure.line}" if failure is not None and failure.file else ""
        return Verdict(False, f"INTERRUPTED with Ctrl-C{where}", code, None)
    judged = failed_checks(session.export_checks)
    if failure is not None and failure.category is Category.USER_ERROR and judged:
        # the script's own check failed after an exported program it made was judged wrong in the run: the
        # program is what is wrong (diagnose says the same, from the same checks)
        check = judged[0]
        where = f" (the script's check then failed at {failure.file}:{failure.line})" if failure.file else ""
        headline = (f"FAILED ({Category.ACCURACY.value}): {STEP_TITLES[check.step]} does not match "
                    f"{check.against}: {clip(check.detail, 160)}{where}")
        return Verdict(False, headline, code, Category.ACCURACY)
    caught = caught_compile_failure(session.failures) if failure is not None else None
    if failure is not None and caught is not None:
        # the script caught a compile's failure and reported its own: the compiler's failure decides
        where = f" at {failure.file}:{failure.line}" if failure.file else ""
        headline = (f"FAILED ({caught.category.value}): {clip(described(caught), 160)} (the script caught it and "
                    f"reported {clip(described(failure), 120)}{where})")
        return Verdict(False, headline, code, caught.category)
    if failure is not None:
        where = f" at {failure.file}:{failure.line}" if failure.file else ""
        first = clip(first_message_line(failure.message), 160)
        headline = f"FAILED ({failure.category.value}): {failure.exception.rsplit('.', 1)[-1]}{where}: {first}"
        return Verdict(False, headline, code, failure.category)
    if failed:
        return Verdict(False, f"FAILED: the script exited with code {code}", code, None)
    if any_wrong(session.accuracy):  # `pt2doctor accuracy` found wrong results
        text = accuracy_headline(session.accuracy).removeprefix("accuracy: ")
        return Verdict(False, f"FAILED ({Category.ACCURACY.value}): {text}", ExitCode.MISMATCH, Category.ACCURACY)
    if not session.compiles:
        if session.extras.source == "trace":  # a trace alone: what the script did is not known
            parts = ["Dynamo started one"] if session.graph_breaks else []
            if session.trace.unreadable:
                parts.append(f"{session.trace.unreadable} line(s) could not be read")
            detail = f" ({'; '.join(parts)})" if parts else ""
            what = "finished compile" if session.graph_breaks else "compile"
            return Verdict(True, f"OK, but the trace holds no {what}{detail}", code)
        why = "the script never called a torch.compile'd function" if session.extras.torch_imported \
            else "the script never imported torch"
        return Verdict(True, f"OK, but nothing was compiled: {why}", code)
    little = compiled_little(session)
    notes = []
    if session.graph_breaks:
        notes.append(f"{session.graph_break_count} graph break(s)")
    if session.recompiles:
        notes.append(f"{len(session.recompiles)} recompile(s)")
    if session.limit_hits:
        notes.append("recompile limit hit")
    tail = f" with {', '.join(notes)}" if notes else ", no graph breaks or recompiles"
    if little is not None:  # the counts alone read as a success: say first that the program ran (mostly) eagerly
        counts = f"; compiled {session.graphs} graph(s){tail}" if session.graphs else ""
        return Verdict(True, f"OK, but {little}{counts}", code)
    return Verdict(True, f"OK: compiled {session.graphs} graph(s) in {session.compile_time_s:.2f} s{tail}", code)

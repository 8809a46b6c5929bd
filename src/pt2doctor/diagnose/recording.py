"""The recording the graph steps read: which recorded run, and which of its graphs stands for the failure.

Contract: `pick_recording(ctx, found, classify) -> Recording` is the step between classifying a failure and
working on its graphs (the stage ladder on the recorded graph, `diagnose.graph_stages`; the minifier,
`diagnose.graph_minify`): for a wrong result, the run whose accuracy check rejected a graph and the graph the
program's own check depends on (`diagnose.wrong_graph`: the first recorded run judged every graph, so this is
usually no run at all); for any other failure, the run that stands for it (`Classified.attempt`). Its graphs are
not to be worked on (`usable` False, with a note where the reader should know why) when recording the graphs
changed how the program ended, or for a hang (every query would wait for the timeout).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pt2doctor.capture.process_meta import RunPaths
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.reproduce import Classified
from pt2doctor.diagnose.step import Context
from pt2doctor.diagnose.wrong_graph import find_wrong_graph
from pt2doctor.model.category_policy import policy
from pt2doctor.model.minify import FailureSignature
from pt2doctor.model.recording import read_unrecorded
from pt2doctor.reduce.program import target_of


@dataclass(frozen=True, slots=True)
class Recording:
    """Where the recorder wrote, and how the program failed: what the graph steps need to pick their graph."""

    run_dir: Path
    usable: bool  # its graphs stand for the failure (see the contract)
    accuracy: bool = False  # a wrong result: the graph the accuracy check rejected (`prefer`), by the accuracy rule
    prefer: str | None = None  # the rejected graph the program's check depends on, when several were rejected
    died_of_signal: bool = False
    signal_target: FailureSignature | None = None  # the signal the program died of, when it did


def pick_recording(ctx: Context, found: Found, classify: Classified) -> Recording:
    run_dir = ctx.runner.run_dir(classify.attempt.label)
    if unrecorded := read_unrecorded(RunPaths(run_dir).graphs_dir):
        found.notes.append(f"{len(unrecorded)} graph(s) could not be recorded (the first, compile id "
                           f"{unrecorded[0].compile_id}: {unrecorded[0].description}): compiled unrecorded, they "
                           "cannot be minified")
    if (why := policy(found.category).not_minified):
        found.notes.append(why)
        return Recording(run_dir, usable=False)
    if found.recording_changed_outcome:  # nothing is taken from a recording that does not fail as the program does
        return Recording(run_dir, usable=False)
    died = bool(found.session and found.session.exit.signal)
    signal = target_of(classify.attempt.signature or "", False) if died else None
    if not policy(found.category).wrong_result:
        return Recording(run_dir, True, died_of_signal=died, signal_target=signal)
    wrong = find_wrong_graph(run_dir, found, ctx.runner)
    return Recording(wrong.run_dir, True, True, wrong.prefer, died, signal)

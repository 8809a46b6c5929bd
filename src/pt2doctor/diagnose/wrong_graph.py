"""Which compiled graph a wrong result comes from, judged on the values the program passed.

Contract: `find_wrong_graph(run_dir, found, runner) -> WrongGraph` never raises for what the script
does. Its runs are the diagnosis's variant runs (`diagnose.runs`): stopped on Ctrl-C, each with its
progress line, and listed in `found.attempts` under their labels. The first recorded run judges each
Dynamo graph's first call with the accuracy rule on copies of the values the program passed
(`diagnose.reproduce`), and keeps the inputs of a graph it rejects: the minifier then starts from those
values, not random ones (a bug such as `1.0 // 0.1` shows on a few values only). A run that judged nothing
(the recorded run that stands for the failure was made without the check) gets one more recorded run
(`runs/accuracy-check`) that does. When the check rejects several graphs, the one the program's own check
depends on is wanted, not merely the last one: for each (up to `MAX_EXPERIMENTS`, in parallel) the program
runs once more with only that graph run as captured, without its backend (`runs/eager-<compile id>`); the
graph whose eager run makes the program pass is preferred, and the others are listed in the notes. A run is
per compile (its key, unique in the process: `CompileId.generation`), so two rejected graphs of one compile
(a forward and its backward) share one. Without a rejected graph, the first run's recording is used as
before (the last graph, on random inputs), and a note says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pt2doctor.capture.process_meta import RunPaths
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.runs import VariantRunner
from pt2doctor.diagnose.variants import Variant
from pt2doctor.model import Category
from pt2doctor.model.child import ChildSpec
from pt2doctor.model.minify import DEFAULT_TOLERANCE
from pt2doctor.model.recording import GraphFailure, read_failures, read_index
from pt2doctor.model.serialize import RecordError, read_record

MAX_EXPERIMENTS = 4


@dataclass(frozen=True, slots=True)
class WrongGraph:
    run_dir: Path  # the recording to minify from
    prefer: str | None = None  # the rejected graph the program's check depends on, when several were rejected


def find_wrong_graph(run_dir: Path, found: Found, runner: VariantRunner) -> WrongGraph:
    checked = run_dir if accuracy_failures(run_dir) or _judged(run_dir) else _checked_run(runner, found)
    if checked is None:
        return WrongGraph(run_dir)
    rejected = list(dict.fromkeys(f.graph for f in accuracy_failures(checked)))
    if not rejected:
        found.notes.append("the per-graph accuracy check judged no compiled graph wrong on the values the program "
                           "passed: the last graph is minified on random inputs")
        return WrongGraph(run_dir)
    if len(rejected) == 1:
        return WrongGraph(checked)
    with found.timed("which_wrong_graph"):
        return WrongGraph(checked, _graph_the_check_depends_on(runner, checked, rejected, found))


def _graph_the_check_depends_on(runner: VariantRunner, checked: Path, rejected: list[str], found: Found) -> str | None:
    """The rejected graph without whose backend the program passes (see the contract), or None."""
    compile_ids = {e.id: e.compile_id for e in read_index(RunPaths(checked).graphs_dir)}
    # one run per compile (its Dynamo graph run as captured): a forward graph and its backward share one
    first_of_compile = {compile_ids[g]: g for g in reversed(rejected) if compile_ids.get(g)}
    tried = [g for g in rejected if g in first_of_compile.values()][:MAX_EXPERIMENTS]
    runner.reporter.status(f"{len(rejected)} graphs compute wrong results: running the program with each of "
                           f"{', '.join(tried)} run eagerly, to find the one its own check depends on")
    futures = {g: runner.submit(Variant.graph_run_eagerly(str(compile_ids[g]))) for g in tried}  # in parallel
    attempts = {g: future.result() for g, future in futures.items()}
    found.attempts += attempts.values()
    verdicts = {g: attempt.outcome == "pass" for g, attempt in attempts.items()}
    fixed = [g for g in tried if verdicts[g]]
    named = ", ".join(f"{g} (compile id {compile_ids[g]})" for g in rejected)
    if not fixed:
        found.notes.append(f"the accuracy check judged several graphs wrong: {named}; the program still fails with "
                           "any one of them run eagerly, so the last one is minified")
        return None
    found.notes.append(f"the accuracy check judged several graphs wrong: {named}; the program's own check passes "
                       f"when {fixed[0]} runs eagerly, so {fixed[0]} is minified")
    return fixed[0]


def _checked_run(runner: VariantRunner, found: Found) -> Path | None:
    """One more recorded run with each graph's first call judged (None: it did not finish in time)."""
    runner.reporter.status("a wrong result: running it once more, recording, with each graph's first call checked "
                           "against eager (fp64-referenced) on the values the program passes")
    with found.timed("accuracy_check"):
        check = runner.submit(Variant.accuracy_check(DEFAULT_TOLERANCE)).result()
    found.attempts.append(check)
    if check.category is Category.TIMEOUT:
        found.notes.append("the run with each graph's accuracy checked did not finish in time")
        return None
    return runner.run_dir(check.label)


def _judged(run_dir: Path) -> bool:
    """Whether the run that recorded `run_dir` judged each graph's first call (`Hooks.record_accuracy_tolerance`)."""
    try:
        spec = read_record(RunPaths(run_dir).spec, ChildSpec)
    except (OSError, RecordError):
        return False
    return spec.hooks.record_accuracy_tolerance is not None


def accuracy_failures(run_dir: Path) -> list[GraphFailure]:
    """The accuracy failures the recorder wrote in `run_dir` ([] without any, or without a readable recording)."""
    try:
        return [f for f in read_failures(RunPaths(run_dir).graphs_dir) if f.phase == "accuracy"]
    except (RecordError, OSError):
        return []

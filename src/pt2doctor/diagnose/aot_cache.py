"""The first run keeps AOTAutograd's cache on, as the user's run does: where that hides the failure, one more run.

Contract: `record_what_the_cache_served(runner, found, first, start_repeat) -> Attempt` is the first step of
`diagnose.reproduce.classify`: the run that stands for the failure, the first (`Variant.original(1)`, which records
the graphs the cache serves at the torch level only, `model.recording.Cached`) or, where `hidden_by_aot_cache` says
why the failure is, or may be, one of theirs, one more recorded run with the cache off that ends the same way.
`hidden_by_aot_cache(run_dir, category, died)` is the rule, on the recording alone. `keeps_aot_cache(runner)`: whether
the first run keeps the cache on at all: not where a GPU is visible, where the runs are not forked and the run recorded
again would stand on the verdict's path for a whole run (tma_pointwise_add_illegal_address on an H200, a served
graph's own failure: 125 s against 90 s with the cache off in the first run, 21 s of it that run).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pt2doctor.capture.process_meta import RunPaths
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.runs import VariantRunner
from pt2doctor.diagnose.variants import Variant
from pt2doctor.model import Category
from pt2doctor.model.category_policy import policy
from pt2doctor.model.diagnosis import Attempt
from pt2doctor.model.minify import DEFAULT_TOLERANCE
from pt2doctor.model.recording import read_cached, read_failures
from pt2doctor.model.serialize import RecordError


def keeps_aot_cache(runner: VariantRunner) -> bool:
    """Whether diagnose's first run keeps AOTAutograd's cache on (see the contract)."""
    return not runner.gpu.visible


def record_what_the_cache_served(runner: VariantRunner, found: Found, a1: Attempt,
                                 start_repeat: Callable[[], None] | None) -> Attempt:
    """The first run keeps AOTAutograd's cache on, as the user's run does (`Variant.original`): the graphs it serves
    are recorded at the torch level only. Where the failure is, or may be, one of theirs (`hidden_by_aot_cache`), one
    more recorded run with that cache off, every after-AOT graph traced, recorded and judged, stands for the failure
    where it ends the same way. The first run's repeat starts just before it (`start_repeat`), so that, started after
    the control, it is forked (`diagnose.forking`) and the two go side by side (warm float_floor_divide: 15.2 s
    against 14.4 s with the cache off in the first run, where made after it the other 18.5 against 14.7)."""
    why = hidden_by_aot_cache(runner.run_dir(a1.label), found.category,
                              died=bool(found.session and found.session.exit.signal))
    if why is None:
        return a1
    runner.reporter.status(f"{why}: recording it again with that cache off")
    if start_repeat is not None:  # the control, started first: the run recorded again is forked once it runs
        start_repeat()
    with found.timed("aot_cache_off"):
        again = runner.submit(Variant.every_aot_graph(DEFAULT_TOLERANCE)).result()
    found.attempts.append(again)
    if again.signature != a1.signature:
        ended = again.error or again.outcome
        found.notes.append(f"{why}; recorded again with that cache off, it ended otherwise ({ended}): the first run "
                           "stands for the failure")
        return a1
    found.notes.append(f"{why}: one more recorded run with that cache off ({again.label}) stands for the failure")
    found.session = runner.sessions.get(again.label)
    found.category, found.error = again.category or found.category, again.error
    return again


def hidden_by_aot_cache(run_dir: Path, category: Category | None, died: bool) -> str | None:
    """Why the failure may lie in, or be seen more precisely in, a graph whose after-AOT graphs AOTAutograd's cache
    served to the run (none of them recorded, judged or watched as it ran: `model.recording.Cached`); None where the
    recording stands as it is. Some graph was served, and: the graph that failed (its run, its accuracy check) is one
    of them, whose after-AOT forward and backward name the culprit's aten ops where its Dynamo graph names torch
    calls (the verdict is the one cold caches give); or no recorded graph shows a failure of a compiled graph (or of a
    check of the program's own that a wrong graph may have failed: `Policy.judged_wrong`), as a wrong gradient or a
    backward's run-time failure leaves it; or the process died of a signal (a served graph's kernel may have killed
    it). A compile failure is never served (a failed compile is not cached): the program's other graphs come from the
    cache, and nothing is made again."""
    graphs = RunPaths(run_dir).graphs_dir
    try:
        served, failures = {c.graph for c in read_cached(graphs)}, read_failures(graphs)
    except RecordError:  # a damaged recording: the minifier reports it when it reads the same file
        return None
    rule = policy(category or Category.UNCLASSIFIED)
    failed = {f.graph for f in failures} & served
    if not served or not (died or failed or not failures and (rule.graph or rule.judged_wrong)):
        return None
    what = ("the process died of a signal" if died else f"graph {sorted(failed)[0]}, which failed, is one of them"
            if failed else "no recorded graph shows the failure")
    return (f"AOTAutograd's cache served {len(served)} graph(s) to the first run, whose after-AOT graphs were neither "
            f"recorded nor judged, and {what}")

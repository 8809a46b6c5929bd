"""What a diagnosis cost in runs, by step (issue #38): the figure to drive down.

Contract: `run_ledger(made, found, ladder_queries, hand_over) -> RunLedger` reads what was done, and runs nothing:
the whole-program runs the variant runner made (`diagnose.runs.RunMade`, stopped ones too: their seconds were
spent), by the step that asked for each; the program reducer's checks (`ProgramRepro.checks`); and the graph-level
runs each result reports: the stage ladder's queries on the recorded graph, the minifier's queries and repro.py's
verifications, the short form's and its regression test's verifications, the bisector's queries, the settings
search's runs, a reduced program's verifications. Steps appear in the order they started (`found.timings`); a step
that made no run is left out. The ledger also says which compile caches the runs shared
(`diagnose.runs.SHARED_CACHES`).
"""

from __future__ import annotations

from collections.abc import Iterable

from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.reported import HandOver
from pt2doctor.diagnose.runs import SHARED_CACHES, RunMade
from pt2doctor.model.diagnosis import RunLedger, StepRuns
from pt2doctor.model.minify import VerifyRuns

_TEST_RUNS = 2  # a regression test is verified twice: it fails now, it passes with compilation off


def run_ledger(made: Iterable[RunMade], found: Found, ladder_queries: int = 0,
               hand_over: HandOver | None = None) -> RunLedger:
    """`ladder_queries`: the graph-level runs of the stage ladder on the recorded graph (`diagnose.graph_stages`);
    `hand_over`: the bisector's queries and the settings search's runs."""
    hand_over = hand_over or HandOver()
    steps: dict[str, StepRuns] = {}

    def add(step: str, whole: int = 0, whole_s: float = 0.0, checks: int = 0, graph: int = 0) -> None:
        s = steps.get(step, StepRuns(step))
        steps[step] = StepRuns(step, s.whole + whole, round(s.whole_s + whole_s, 3), s.checks + checks,
                               s.graph + graph)

    for run in made:
        add(run.step or "reproduce", whole=1, whole_s=run.seconds)
    if ladder_queries:
        add("stage_evidence", graph=ladder_queries)
    m = found.minify
    if m is not None:
        add("minify" if "minify" in found.timings else "minify_early", graph=m.queries + _runs(m.verify_runs))
    p = found.program
    if found.short is not None and not (p is not None and found.short.repro == p.repro_path):  # else p's runs
        add("short_repro", graph=_runs(found.short.runs) + (_TEST_RUNS if found.short.test else 0))
    if hand_over.bisection is not None:
        add("bisect", graph=hand_over.bisection.queries)
    if hand_over.settings is not None:
        add("settings", graph=hand_over.settings.runs)
    if p is not None:
        add("program_reduction", checks=p.checks, graph=_runs(p.verify_runs) + (_TEST_RUNS if p.test else 0))
    order = list(found.timings)  # the steps in the order they started
    return RunLedger.of(tuple(sorted(steps.values(), key=lambda s: order.index(s.step) if s.step in order
                                     else len(order))), SHARED_CACHES)


def _runs(runs: VerifyRuns | None) -> int:
    return runs.runs if runs is not None else 0

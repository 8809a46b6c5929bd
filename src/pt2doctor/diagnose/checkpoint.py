"""The verdict first: said and written as soon as it is known, the hand-over after it (issue #38).

Contract: a `Checkpoint` is called by `diagnose.step.run_steps` after each step (`Context.after_step`). Once the
verdict is known (`diagnose.conclusions.verdict_words`: the category and the stage, the category refined by the stage
as the final diagnosis refines it; at the Dynamo stage only once the run with compilation off told a Dynamo bug from
the script's own) it is said once, as a progress line `verdict: ...` (saying so when the second run of the program,
which checks that the failure repeats, has not ended yet: `diagnose.reproduce.repeated`). After every step, the
diagnosis so far is handed to `publish` (the CLI writes it as diagnosis.json, `report.issue.write_diagnosis`), with
the steps still to come (`Diagnosis.pending`) and the runs made so far, its headline the verdict until the diagnosis
concludes: a diagnosis stopped from outside, or killed, leaves what it had found. `frozen()` is the diagnosis as it
stands, by the same rule (`diagnose.frozen.freeze` with the run ledger, `diagnose.ledger`, and what the steps
returned for the report, `diagnose.reported`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pt2doctor.capture.runner import Reporter
from pt2doctor.diagnose.conclusions import verdict_words
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.frozen import freeze
from pt2doctor.diagnose.ledger import run_ledger
from pt2doctor.diagnose.reported import Reported
from pt2doctor.diagnose.reproduce import Reproduced
from pt2doctor.diagnose.runs import VariantRunner
from pt2doctor.model.diagnosis import Diagnosis

Publish = Callable[[Diagnosis], object]  # what it returns is not read


class Checkpoint:
    def __init__(self, found: Found, runner: VariantRunner, results: dict[str, Any], steps: Sequence[str],
                 reporter: Reporter, publish: Publish | None) -> None:
        self.found, self.runner, self.results, self.steps = found, runner, results, list(steps)
        self.reporter, self.publish = reporter, publish
        self.said = False

    def __call__(self, step: str) -> None:
        if not self.said and (words := verdict_words(self.found)):
            self.said = True
            reproduced = self.results.get("reproduce")
            pending = (isinstance(reproduced, Reproduced) and reproduced.pending is not None
                       and reproduced.pending.running())
            checking = "the second run, which checks that it repeats, is still running; " if pending else ""
            self.reporter.status(f"verdict: {words} ({checking}what follows is the hand-over: repro, workarounds)")
        if self.publish is not None:
            self.publish(self.frozen(tuple(self.steps[self.steps.index(step) + 1:])))

    def frozen(self, pending: tuple[str, ...] = ()) -> Diagnosis:
        evidence = self.results.get("stage_evidence")
        ladder = evidence.graph.queries if evidence is not None and evidence.graph is not None else 0
        reported = self.reported()
        runs = run_ledger(self.runner.made, self.found, ladder, reported.hand_over)
        return freeze(self.found, runs, pending, reported)

    def reported(self) -> Reported:
        return Reported.of(self.results, self.found.set_aside)


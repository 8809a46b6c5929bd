"""The FX oracle: turn candidate graphs into repro scripts, run them in the worker pool, judge.

Contract: `FxOracle(cases)` answers one `Outcome` per case, relative to the target signature:
- the script raised and its normalised description equals the target -> FAILS_SAME;
- it raised something else (including `InvalidRepro`: eager itself fails) -> FAILS_OTHER;
- it died of the target signal -> FAILS_SAME; of another signal -> CRASHED;
- it ran past the per-query timeout -> TIMEOUT; it finished cleanly -> PASSES.
A candidate therefore fails "the same way" exactly when `python repro.py` on it would print the
same `PT2DOCTOR REPRO FAILED` line (or die of the same signal), which is what `verify` checks.
`FxOracle.first_failing(cases)` answers in order up to the first case that fails the same way and no further: the
cases after it are cancelled once every one before it has answered (None), since the reducer takes the first
(`reduce.core.ReductionProblem.consider_first`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pt2doctor.model import signature
from pt2doctor.model.minify import DEFAULT_TOLERANCE, BackendSpec, FailureSignature, Stage
from pt2doctor.processes.pool import RunResult, WorkerPool
from pt2doctor.reduce.core import Outcome
from pt2doctor.reduce.repro import ReproScript, render

if TYPE_CHECKING:
    from pt2doctor.reduce.fx_case import FxCase


@dataclass(frozen=True, slots=True)
class ReproContext:
    """Everything about how the failing graph was compiled, besides the graph itself."""

    stage: Stage
    backend: BackendSpec
    config_lines: tuple[str, ...] = ()
    accuracy: bool = False
    tolerance: float = DEFAULT_TOLERANCE
    header: tuple[str, ...] = ()
    backward: bool = False  # an after-AOT backward graph (`ReproScript.backward`)
    inductor_configs: str = "None"  # Stage.AOTI (`ReproScript.inductor_configs`)
    grads: bool = False  # a Dynamo graph judged with its backward (`ReproScript.grads`)
    grad_enabled: bool = True  # the grad mode it was compiled under (`ReproScript.grad_enabled`)


def script_for(case: FxCase, context: ReproContext) -> ReproScript:
    return ReproScript(
        stage=context.stage, forward_code=case.code, inputs=case.inputs, backend=context.backend,
        prelude=case.prelude, config_lines=context.config_lines, accuracy=context.accuracy,
        tolerance=context.tolerance, header=context.header, backward=context.backward,
        inductor_configs=context.inductor_configs, grads=context.grads, grad_enabled=context.grad_enabled,
    )


def signature_of(result: RunResult) -> FailureSignature | None:
    """The failure a worker run showed; None when it passed, timed out or broke in the worker."""
    if result.status == "failed":
        return signature.from_description(result.text)
    if result.status == "signal":
        return signature.from_signal(int(result.text))
    return None


_STATUS = {"ok": Outcome.PASSES, "timeout": Outcome.TIMEOUT, "error": Outcome.FAILS_OTHER}


def judge(result: RunResult, target: FailureSignature) -> Outcome:
    if result.status in _STATUS:
        return _STATUS[result.status]
    if signature_of(result) == target:
        return Outcome.FAILS_SAME
    return Outcome.CRASHED if result.status == "signal" else Outcome.FAILS_OTHER


class FxOracle:
    def __init__(self, pool: WorkerPool, context: ReproContext, target: FailureSignature) -> None:
        self.pool = pool
        self.context = context
        self.target = target

    def __call__(self, cases: Sequence[FxCase]) -> list[Outcome]:
        results = self.pool.run([render(script_for(c, self.context)) for c in cases])
        return [judge(r, self.target) for r in results]

    def first_failing(self, cases: Sequence[FxCase]) -> list[Outcome | None]:
        results = self.pool.run_until([render(script_for(c, self.context)) for c in cases], self._decided)
        return [None if r is None else judge(r, self.target) for r in results]

    def _decided(self, results: Sequence[RunResult | None]) -> bool:
        """Whether a case fails the same way with every one before it answered: the rest cannot change the pick."""
        for result in results:
            if result is None:
                return False
            if judge(result, self.target) is Outcome.FAILS_SAME:
                return True
        return False

"""What-if: which configuration changes might fix a session's breaks and recompiles, and did they?

Contract: pure functions, no I/O. `propose_trials(session)` lists the configuration changes that the
session's findings suggest and that can be tried without editing the script (each a `Trial` whose
`overrides` is the JSON that `capture/overrides.py` applies in the child). `judge(trial, before,
after, outputs_equal)` compares the baseline run with the run under the change: a trial is VERIFIED
when the metric it targets went down, the script still succeeded, and the recorded outputs of the
compiled functions are equal; REFUTED otherwise, with the reason. `outputs_equal(a, b)` compares the
output summaries both runs recorded (None when either recorded nothing, e.g. no compiled call ran).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

from pt2doctor.analysis.cookbook import advice_for
from pt2doctor.analysis.recompiles import pretty_function, recompile_chains, torch_source
from pt2doctor.model import GuardKind, Session

Target = Literal["graph_breaks", "recompiles"]
_RTOL, _ATOL = 1e-3, 1e-4


class Outcome(str, Enum):
    VERIFIED = "verified"
    REFUTED = "refuted"


@dataclass(frozen=True, slots=True)
class Trial:
    name: str
    change: str
    overrides: str
    target: Target
    because: str


@dataclass(frozen=True, slots=True)
class Measure:
    graph_breaks: int
    recompiles: int
    limit_hits: int
    graphs: int
    compile_time_s: float
    ok: bool

    def of(self, target: Target) -> int:
        return self.graph_breaks if target == "graph_breaks" else self.recompiles + self.limit_hits


@dataclass(frozen=True, slots=True)
class TrialResult:
    trial: Trial
    before: Measure
    after: Measure
    outputs_equal: bool | None
    outcome: Outcome
    why: str
    run_dir: str | None = None


_BREAK_CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "torch._dynamo.config.capture_scalar_outputs":
        ("torch._dynamo.config.capture_scalar_outputs = True", {"dynamo_config": {"capture_scalar_outputs": True}}),
    "torch._dynamo.config.capture_dynamic_output_shape_ops":
        ("torch._dynamo.config.capture_dynamic_output_shape_ops = True",
         {"dynamo_config": {"capture_dynamic_output_shape_ops": True}}),
    "torch._dynamo.config.reorderable_logging_functions":
        ("torch._dynamo.config.reorderable_logging_functions.add(print)", {"reorderable_print": True}),
}


def propose_trials(session: Session) -> list[Trial]:
    trials: dict[str, Trial] = {}
    for gb in session.graph_breaks:
        recipe = advice_for(gb)
        if recipe is None or recipe.config not in _BREAK_CONFIGS or recipe.name in trials:
            continue
        if recipe.name in ("logging",):  # only `print` can be made reorderable from outside the script
            continue
        change, overrides = _BREAK_CONFIGS[recipe.config]
        trials[recipe.name] = Trial(recipe.name, change, json.dumps(overrides), "graph_breaks",
                                    f"graph break at {gb.file}:{gb.line}: {recipe.cause}")
    trials.update({t.name: t for t in _recompile_trials(session)})
    return list(trials.values())


def _recompile_trials(session: Session) -> list[Trial]:
    sources: dict[str, str] = {}
    for chain in recompile_chains(session):
        for step in chain.steps:
            cause = step.cause
            if cause is None or cause.kind not in (GuardKind.SIZE, GuardKind.SYMBOLIC, GuardKind.VALUE):
                continue
            source = torch_source(cause)
            if source is None or "___" in source:  # Dynamo's own temporaries cannot be marked
                continue
            entry = f"{source}:{cause.dim}" if cause.dim is not None and cause.kind is not GuardKind.VALUE else source
            sources.setdefault(entry, f"{pretty_function(chain.function)}: {cause.text}")
    if not session.recompiles and not session.limit_hits:
        return []
    because = "; ".join(sources.values()) or f"{len(session.recompiles)} recompile(s)"
    trials = [Trial("dynamic=True", "torch.compile(..., dynamic=True)", json.dumps({"compile_kwargs": {"dynamic": True}}),
                    "recompiles", because)]
    if sources:
        calls = ", ".join(sources)
        trials.insert(0, Trial("mark_dynamic", f"mark dynamic: {calls}", json.dumps({"mark_dynamic": list(sources)}),
                               "recompiles", because))
    return trials


def measure(session: Session) -> Measure:
    return Measure(session.graph_break_count, len(session.recompiles), len(session.limit_hits), session.graphs,
                   round(session.compile_time_s, 4), session.exit.ok and not session.failures)


def judge(trial: Trial, before: Session, after: Session, equal: bool | None, run_dir: str | None = None) -> TrialResult:
    b, a = measure(before), measure(after)
    what = trial.target.replace("_", " ")
    if not a.ok and b.ok:
        outcome, why = Outcome.REFUTED, "the script failed under this change"
    elif equal is False:
        outcome, why = Outcome.REFUTED, "the compiled functions returned different values"
    elif a.of(trial.target) < b.of(trial.target):
        outcome, why = Outcome.VERIFIED, f"{what}: {b.of(trial.target)} -> {a.of(trial.target)}"
    else:
        outcome, why = Outcome.REFUTED, f"{what} did not go down ({b.of(trial.target)} -> {a.of(trial.target)})"
    return TrialResult(trial, b, a, equal, outcome, why, run_dir)


def outputs_equal(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> bool | None:
    """Compare two runs' recorded outputs, matched by (compiled callable, call number)."""
    if not before or not after:
        return None
    a = {(r["fn"], r["call"]): r["value"] for r in before}
    b = {(r["fn"], r["call"]): r["value"] for r in after}
    return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)


def _same(x: Any, y: Any) -> bool:
    if not isinstance(x, dict) or not isinstance(y, dict) or x.keys() != y.keys():
        return x == y
    if "tensor" in x:
        return x["tensor"] == y["tensor"] and x["shape"] == y["shape"] and len(x["values"]) == len(y["values"]) \
            and all(_close(p, q) for p, q in zip(x["values"], y["values"]))
    if "seq" in x:
        return len(x["seq"]) == len(y["seq"]) and all(_same(p, q) for p, q in zip(x["seq"], y["seq"]))
    if "dict" in x:
        return x["dict"].keys() == y["dict"].keys() and all(_same(x["dict"][k], y["dict"][k]) for k in x["dict"])
    if "py" in x and isinstance(x["py"], float) and isinstance(y["py"], float):
        return _close(x["py"], y["py"])
    return x == y


def _close(p: float, q: float) -> bool:
    if isinstance(p, float) and isinstance(q, float) and (math.isnan(p) or math.isnan(q)):
        return math.isnan(p) and math.isnan(q)
    return p == q or abs(p - q) <= _ATOL + _RTOL * abs(q)

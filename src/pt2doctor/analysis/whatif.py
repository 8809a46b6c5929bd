"""What-if: which configuration changes might fix a session's breaks and recompiles, and did they?

Contract: pure functions, no I/O. `propose_trials(session)` lists the configuration changes that the
session's findings suggest and that can be tried without editing the script (each a `Trial` whose
`overrides` is the JSON that `capture/child/overrides.py` applies in the child). `judge(trial, before,
after, outputs_equal)` compares the baseline run with the run under the change: a trial is VERIFIED
when the metric it targets went down, the script still succeeded, and the recorded outputs of the
compiled functions are equal; REFUTED otherwise, with the reason. `outputs_equal(a, b)` compares the
output summaries both runs recorded (None when either recorded nothing, e.g. no compiled call ran).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

from pt2doctor.analysis.cookbook import advice_for
from pt2doctor.analysis.recompiles import Cause, cause_of, pretty_function, recompile_chains
from pt2doctor.model import GuardFailure, GuardKind, Session
from pt2doctor.model.outputs import (
    DictSummary,
    FloatSummary,
    Number,
    OutputRecord,
    SeqSummary,
    TensorSummary,
    ValueSummary,
    as_float,
)

Target = Literal["graph_breaks", "recompiles"]
_RTOL, _ATOL = 1e-3, 1e-4


class TrialOutcome(str, Enum):
    """What a trial did: its change lowered the count it targets without breaking the script or its results."""

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
    outcome: TrialOutcome
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


_DYNAMIC_SOURCE = {Cause.SIZE, Cause.SYMBOLIC, Cause.INT, Cause.MODULE_INT}  # what dynamic_sources can mark
_DYNAMIC_TRUE_HELPS = {Cause.SIZE, Cause.SYMBOLIC, Cause.INT, Cause.CARRIED_TENSOR}
# configs that torch's own hint (or its docs) name for a cause; tried as they are
_CAUSE_CONFIGS: dict[Cause, tuple[str, str, dict[str, Any]]] = {
    Cause.MODULE_INT: ("allow_unspec_int_on_nn_module", "torch._dynamo.config.allow_unspec_int_on_nn_module = True",
                       {"dynamo_config": {"allow_unspec_int_on_nn_module": True}}),
    Cause.FLOAT: ("specialize_float", "torch._dynamo.config.specialize_float = False",
                  {"dynamo_config": {"specialize_float": False}}),
}


def _recompile_trials(session: Session) -> list[Trial]:
    if not session.recompiles and not session.limit_hits:
        return []
    marks: dict[str, dict[str, str]] = {"dynamic": {}, "unbacked": {}}
    configs: dict[Cause, list[str]] = {}
    dynamic_helps: list[str] = []
    for chain in recompile_chains(session):
        for step in chain.steps:
            if step.cause is None:
                continue
            cause, why = cause_of(step.cause), f"{pretty_function(chain.function)}: {step.cause_words}"
            entry = _source_entry(step.cause)
            if entry is not None and cause in _DYNAMIC_SOURCE | {Cause.ZERO_ONE}:
                marks["unbacked" if cause is Cause.ZERO_ONE else "dynamic"].setdefault(entry, why)
            if cause in _CAUSE_CONFIGS or (cause is Cause.CARRIED_VALUE and "." in (step.cause.expected or "")):
                configs.setdefault(Cause.FLOAT if cause is Cause.CARRIED_VALUE else cause, []).append(why)
            if cause in _DYNAMIC_TRUE_HELPS:
                dynamic_helps.append(why)
    trials = [Trial(f"mark_{kind}", f"mark {kind}: {', '.join(found)}", json.dumps({f"mark_{kind}": list(found)}),
                    "recompiles", "; ".join(found.values())) for kind, found in marks.items() if found]
    trials += [Trial(_CAUSE_CONFIGS[c][0], _CAUSE_CONFIGS[c][1], json.dumps(_CAUSE_CONFIGS[c][2]), "recompiles",
                     "; ".join(dict.fromkeys(whys))) for c, whys in configs.items()]
    if dynamic_helps:
        trials.append(Trial("dynamic=True", "torch.compile(..., dynamic=True)",
                            json.dumps({"compile_kwargs": {"dynamic": True}}), "recompiles",
                            "; ".join(dict.fromkeys(dynamic_helps))))
    return trials


def _source_entry(failure: GuardFailure) -> str | None:
    """`L['x']:0` for a tensor's dim, `L['self'].n` for a scalar; None for Dynamo's temporaries."""
    source = failure.torch_source
    if source is None or "___" in source:  # Dynamo's own temporaries cannot be marked
        return None
    return f"{source}:{failure.dim}" if failure.dim is not None and failure.kind is not GuardKind.VALUE else source


def measure(session: Session) -> Measure:
    return Measure(session.graph_break_count, len(session.recompiles), len(session.limit_hits), session.graphs,
                   round(session.compile_time_s, 4), session.exit.ok and not session.failures)


def judge(trial: Trial, before: Session, after: Session, equal: bool | None, run_dir: str | None = None) -> TrialResult:
    b, a = measure(before), measure(after)
    what = _counts(trial.target, b, a)
    if not a.ok and b.ok:
        outcome, why = TrialOutcome.REFUTED, "the script failed under this change"
    elif equal is False:
        outcome, why = TrialOutcome.REFUTED, "the compiled functions returned different values"
    elif a.of(trial.target) < b.of(trial.target):
        outcome, why = TrialOutcome.VERIFIED, what
    else:
        outcome, why = TrialOutcome.REFUTED, f"did not go down: {what}"
    return TrialResult(trial, b, a, equal, outcome, why, run_dir)


def _counts(target: Target, b: Measure, a: Measure) -> str:
    """The measured numbers the verdict rests on, spelled as the `measured` line spells them."""
    if target == "graph_breaks":
        return f"graph breaks {b.graph_breaks} -> {a.graph_breaks}"
    return f"recompiles {b.recompiles} -> {a.recompiles}, limit hits {b.limit_hits} -> {a.limit_hits}"


def outputs_equal(before: Sequence[OutputRecord], after: Sequence[OutputRecord]) -> bool | None:
    """Compare two runs' recorded outputs, matched by (compiled callable, call number)."""
    if not before or not after:
        return None
    a = {(r.fn, r.call): r.value for r in before}
    b = {(r.fn, r.call): r.value for r in after}
    return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)


def _same(x: ValueSummary, y: ValueSummary) -> bool:
    if isinstance(x, TensorSummary) and isinstance(y, TensorSummary):
        return x.dtype == y.dtype and x.shape == y.shape and len(x.values) == len(y.values) \
            and all(_close(p, q) for p, q in zip(x.values, y.values))
    if isinstance(x, SeqSummary) and isinstance(y, SeqSummary):
        return len(x.items) == len(y.items) and all(_same(p, q) for p, q in zip(x.items, y.items))
    if isinstance(x, DictSummary) and isinstance(y, DictSummary):
        return x.items.keys() == y.items.keys() and all(_same(x.items[k], y.items[k]) for k in x.items)
    if isinstance(x, FloatSummary) and isinstance(y, FloatSummary):
        return _close(x.value, y.value)
    return x == y


def _close(p: Number, q: Number) -> bool:
    a, b = as_float(p), as_float(q)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or abs(a - b) <= _ATOL + _RTOL * abs(b)

"""Accuracy results, one per compiled graph: the values `pt2doctor accuracy` puts in the session.

Contract: plain frozen values, no torch. The child's probe (`capture/child/accuracy_probe.py`) writes one
`GraphAccuracy` per compiled graph as a JSON line; the parent reads them back (`convert`), adds what
it learns from re-checks (`analysis/accuracy.py`) and stores them as `Session.accuracy` (the
`accuracy` key of session.json, docs/reference/session-json.md). Errors are measured against eager on the same inputs;
`rmse_ratio` is RMSE(compiled, fp64 eager) / RMSE(eager fp32, fp64 eager), the quantity PyTorch's rule bounds
(None when eager matches fp64 exactly, so the ratio is undefined). `fp64_unavailable` says why some
output had no fp64 value (that output was then judged against eager alone, allclose within the
tolerance, as `same_two_models` does); `reference_equals_eager` that the fp64 values equal eager's
exactly, so they say nothing about this graph's rounding (a graph that casts its result to float32).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

import msgspec

from pt2doctor.model.minify import MinifyResult, Stage

AccuracyVerdict = Literal["pass", "fail", "error"]


class NonBugCause(str, Enum):
    """A known reason for a difference that is not a compiler bug."""

    RANDOM = "random"  # ops that draw: compiled may draw differently (Inductor: unless fallback_random)
    REDUCED_PRECISION = "reduced_precision"  # bf16/fp16 values or TF32 matmuls
    NONDETERMINISM = "nondeterminism"  # the compiled graph differs from itself run to run


@dataclass(frozen=True, slots=True)
class Errors:
    """How far one set of compiled values is from eager's, and PyTorch's verdict on it."""

    verdict: AccuracyVerdict
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    rmse_ratio: float | None = None
    rmse_compiled: float | None = None
    rmse_eager: float | None = None


@dataclass(frozen=True, slots=True)
class DivergentNode:
    """One intermediate of the graph, compared on its own in the instrumented run."""

    node: str
    op: str
    file: str | None
    line: int | None
    code: str | None = None
    shape: tuple[int, ...] = ()
    dtype: str | None = None
    max_abs_err: float | None = None
    rmse_ratio: float | None = None
    index: int = 0  # position among the compared intermediates, in topological order


@dataclass(frozen=True, slots=True)
class Recheck:
    """The same graph judged again in a run with `config` applied (e.g. fallback_random)."""

    config: dict[str, Any]
    verdict: AccuracyVerdict


class MinifySummary(msgspec.Struct, frozen=True, omit_defaults=True):
    """What minifying a failing graph gave (`GraphAccuracy.minified`): the repro and its sizes, or
    only `error` (why it could not be minified); `time_s` either way. Empty fields are left out."""

    graph: str | None = None
    stage: Stage | None = None
    nodes_before: int | None = None
    nodes_after: int | None = None
    ops: tuple[str, ...] | None = None
    verified: bool | None = None
    minimal: bool | None = None
    repro: str | None = None
    queries: int | None = None
    time_s: float | None = None
    error: str | None = None

    @classmethod
    def of(cls, result: MinifyResult, time_s: float) -> MinifySummary:
        return cls(graph=result.graph, stage=result.stage, nodes_before=result.nodes_before,
                   nodes_after=result.nodes_after, ops=result.ops, verified=result.verified, minimal=result.minimal,
                   repro=result.repro_path, queries=result.queries, time_s=time_s)


@dataclass(frozen=True, slots=True)
class GraphAccuracy:
    graph: str  # the compile id, "0/0"
    verdict: AccuracyVerdict
    max_abs_err: float | None = None
    rmse_ratio: float | None = None
    forward: Errors | None = None
    backward: Errors | None = None
    first_divergent: DivergentNode | None = None
    top_divergent: tuple[DivergentNode, ...] = ()
    nodes_compared: int = 0
    random_ops: tuple[str, ...] = ()
    reduced_precision: tuple[str, ...] = ()
    deterministic: bool | None = None
    run_to_run_max_abs: float | None = None
    causes: tuple[NonBugCause, ...] = ()
    explained: bool = False  # every difference is accounted for by a known non-bug
    recheck: Recheck | None = None
    minified: MinifySummary | None = None
    error: str | None = None
    function: str | None = None
    backend: str | None = None  # the backend's name (`inductor`, `aot_eager`, a callable's __name__)
    fp64_unavailable: str | None = None  # why an output had no fp64 reference: "RuntimeError: ..."

    @property
    def real_failure(self) -> bool:
        return self.verdict == "fail" and not self.explained

    @property
    def inductor(self) -> bool:
        """Inductor compiled the graph, so Inductor's configs (fallback_random) can change its results."""
        return self.backend == "inductor"

    @property
    def reference_equals_eager(self) -> bool:
        judged = [e for e in (self.forward, self.backward) if e is not None and e.rmse_eager is not None]
        return bool(judged) and all(e.rmse_eager == 0.0 for e in judged)

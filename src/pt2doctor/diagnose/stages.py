"""The stage ladder of the troubleshooting guide, and which stage a set of runs blames. Pure.

Contract: `ladder(original)` lists (backend, stage) from the simplest backend up to the original
one: `eager` exercises Dynamo alone, `aot_eager` adds AOTAutograd, `aot_eager_decomp_partition`
adds decompositions and the partitioner, and the original backend adds Inductor (or the user's own
backend). A ladder never goes past the original: a script compiled with `aot_eager` is judged on
`eager` and `aot_eager` only. `blame(ladder, outcomes)` returns the first stage whose run failed and
the table {backend: pass | fail | skipped}; rungs above the first failure that were not run are
`skipped`.
"""

from __future__ import annotations

from collections.abc import Mapping

from pt2doctor.model.diagnosis import FailingStage, StageOutcome

REFERENCE: tuple[tuple[str, FailingStage], ...] = (
    ("eager", FailingStage.DYNAMO),
    ("aot_eager", FailingStage.AOT_AUTOGRAD),
    ("aot_eager_decomp_partition", FailingStage.DECOMP_PARTITION),
)
# stages past Dynamo: a graph to minify
GRAPH_STAGES = (FailingStage.AOT_AUTOGRAD, FailingStage.DECOMP_PARTITION, FailingStage.INDUCTOR, FailingStage.BACKEND)


def ladder(original: str | None) -> list[tuple[str, FailingStage]]:
    names = [backend for backend, _ in REFERENCE]
    if original in names:
        return list(REFERENCE[: names.index(original) + 1])
    top = original or "inductor"
    return [*REFERENCE, (top, FailingStage.INDUCTOR if top == "inductor" else FailingStage.BACKEND)]


def blame(rungs: list[tuple[str, FailingStage]],
          outcomes: Mapping[str, str]) -> tuple[FailingStage | None, dict[str, StageOutcome]]:
    """`outcomes` maps a backend to "pass" or "fail" for the runs made; the top rung is the original
    run, which failed (that is why we are here) unless told otherwise."""
    table: dict[str, StageOutcome] = {}
    stage = None
    for backend, name in rungs:
        result = outcomes.get(backend)
        if stage is not None or result is None:
            table[backend] = "skipped" if result is None else result  # type: ignore[assignment]
            continue
        table[backend] = result  # type: ignore[assignment]
        if result == "fail":
            stage = name
    return stage, table

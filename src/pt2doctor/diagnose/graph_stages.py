"""The stage ladder climbed on the recorded graph, not on the whole program (issue #38: one recorded run serves
many steps).

Contract: `climb_on_graph(pool, recording, ...) -> GraphLadder` never raises for what a graph does. The graph is
the Dynamo graph the failing run's recorder kept for the failure (`reduce.fx_load.load_failing`: the graph that
failed, else the Dynamo graph its after-AOT graph came from; for a wrong result, the graph the accuracy check
rejected, with the values it was judged on). Every rung of the ladder (`diagnose.stages.ladder`: `eager`,
`aot_eager`, `aot_eager_decomp_partition`, then the script's own backend) compiles that graph alone, in the warm
workers the minifier then uses, all at once, judged as every minifier query is (`reduce.oracle.judge`). The answer
is `conclusive` only when the script's own backend fails on the graph exactly as the program failed (the recorded
failure; a wrong result by the accuracy rule; a signal death by the same signal), and each lower rung either
passes or fails that same way: then the first rung that fails is the stage, as the whole-program ladder would say,
for a few graph-level runs instead of three runs of the program. Anything else (the graph does not fail alone, a
lower rung fails otherwise, eager itself fails on it, a stub standing for a backend whose source could not be read)
is not conclusive, says why, and the whole program climbs the ladder instead (`diagnose.narrowing`).

A backward graph has no Dynamo graph of its own to climb on: AOTAutograd made it, and only the script's backend
compiles it (its `bw_compiler`). That top rung alone is asked (`after_aot`): compiled alone, as AOTAutograd handed it
over, and judged against its own eager run; where it fails as the program did, the compile of that graph is at fault
(a graph AOTAutograd got wrong computes the same wrong values eagerly, and no check of it fails), so the stage is the
backend's, and the lower rungs, which do not apply past AOTAutograd, are not run ("skipped").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from pt2doctor.diagnose.recording import Recording
from pt2doctor.diagnose.stages import ladder
from pt2doctor.model.minify import BackendKind, BackendSpec, FailureSignature, Stage
from pt2doctor.model.signature import accuracy_signature
from pt2doctor.reduce.core import Outcome

if TYPE_CHECKING:
    from pt2doctor.processes.pool import RunResult, WorkerPool
    from pt2doctor.reduce.fx_load import RecordedFailure

_WORDS = {Outcome.FAILS_OTHER: "fails otherwise", Outcome.CRASHED: "crashes otherwise",
          Outcome.TIMEOUT: "did not finish in time", Outcome.PASSES: "passes"}


@dataclass(frozen=True, slots=True)
class GraphLadder:
    """The ladder on one recorded graph: `outcomes` by backend (pass or fail, the rungs that were judged), whether
    it decides the stage (`conclusive`, else `why` not), and how many graph-level runs it took."""

    graph: str
    outcomes: dict[str, str] = field(default_factory=dict)
    conclusive: bool = False
    why: str = ""
    queries: int = 0
    after_aot: bool = False  # a backward graph: the script's backend alone compiled it (see the contract)


def climb_on_graph(pool: WorkerPool, recording: Recording, original: str | None, out_dir: Path) -> GraphLadder:
    from pt2doctor.reduce.fx_load import NothingToMinify

    try:
        recorded = _dynamo_graph(recording, out_dir, backward=True)
    except NothingToMinify as exc:
        return GraphLadder("", why=f"no Dynamo graph to climb the ladder on ({exc})")
    except Exception as exc:  # noqa: BLE001 - a graph that cannot be loaded leaves the whole-program ladder
        return GraphLadder("", why=f"the recorded graph could not be loaded ({type(exc).__name__}: {exc})")
    if recorded.context.backend.kind is BackendKind.STUB:
        return GraphLadder(recorded.graph_id, why="the script's backend could not be read, only stood in for")
    target = recorded.expected or (accuracy_signature() if recorded.context.accuracy else recording.signal_target)
    backends = [backend for backend, _ in ladder(original)]
    if recorded.context.backward:
        top = backends[-1:]
        return replace(_judge(recorded.graph_id, top, _ask(pool, recorded, top), target), after_aot=True)
    return _judge(recorded.graph_id, backends, _ask(pool, recorded, backends), target)


def dynamo_graph_script(recording: Recording, out_dir: Path) -> tuple[str, FailureSignature] | None:
    """The recorded failing graph's Dynamo graph as a program compiling it with the script's own backend (the
    ladder's top rung: every phase of the compiler runs, decompositions and graph passes included), with the failure
    it must show; None where there is none to load (a backward graph) or it cannot be loaded. Its values are saved in
    `out_dir`, which the program names as its `__file__`'s folder: a worker runs it under the minimal repro's name."""
    from pt2doctor.reduce.oracle import script_for
    from pt2doctor.reduce.repro import render

    try:
        recorded = _dynamo_graph(recording, out_dir)
    except Exception:  # noqa: BLE001 - no Dynamo graph: the caller goes without
        return None
    target = recorded.expected or (accuracy_signature() if recorded.context.accuracy else recording.signal_target)
    if recorded.context.backend.kind is BackendKind.STUB or target is None:
        return None
    text = render(script_for(recorded.case, recorded.context))
    return f"__file__ = {str(out_dir / 'repro.py')!r}\n{text}", target


def _dynamo_graph(recording: Recording, out_dir: Path, backward: bool = False) -> RecordedFailure:
    """The recorded failing graph's Dynamo graph (see the contract), its values saved for the workers; with
    `backward`, a failing backward graph itself."""
    from pt2doctor.reduce.fx_load import NothingToMinify, load_failing

    load = {"accuracy": recording.accuracy, "out_dir": out_dir, "prefer": recording.prefer,
            "died_of_signal": recording.died_of_signal}
    recorded = load_failing(recording.run_dir, **load)  # type: ignore[arg-type]
    if recorded.context.stage is Stage.DYNAMO or (backward and recorded.context.backward):
        return recorded
    if recorded.context.backward:
        raise NothingToMinify(f"graph {recorded.graph_id} is a backward graph, compiled only inside the program")
    return load_failing(recording.run_dir, dynamo=True, **load)  # type: ignore[arg-type]


def _ask(pool: WorkerPool, recorded: RecordedFailure, backends: list[str]) -> list[RunResult]:
    """Every rung at once: the reference backends by name, the top one as the recording carries it; in the ladder's
    order. The workers take them top rung first: each rung compiles what the one below does and more, so the
    longest starts first rather than behind the others (GPT-2's ladder on two workers: 5.5-6.4 s, against 6.3-6.6 s
    bottom rung first)."""
    from pt2doctor.reduce.oracle import script_for
    from pt2doctor.reduce.repro import render

    contexts = [replace(recorded.context, backend=BackendSpec(BackendKind.NAMED, backend)) for backend in backends[:-1]]
    scripts = [render(script_for(recorded.case, context)) for context in (*contexts, recorded.context)]
    return pool.run(scripts[::-1])[::-1]


def _judge(graph: str, backends: Sequence[str], results: Sequence[RunResult],
           target: FailureSignature | None) -> GraphLadder:
    from pt2doctor.reduce.oracle import judge, signature_of

    lower, top_backend = backends[:-1], backends[-1]
    top = results[-1]
    seen = signature_of(top)
    if target is None and seen is not None and not seen.text.startswith("InvalidRepro"):
        target = seen  # a wrapper recorded (Inductor's compile workers): the graph alone says what failed
    asked = len(results)
    if target is None or judge(top, target) is not Outcome.FAILS_SAME:
        how = "passes" if top.status == "ok" else f"{top.status}: {seen or top.text[:200]}"
        return GraphLadder(graph, why=f"the graph alone with {top_backend!r} does not fail as the program did ({how})",
                           queries=asked)
    outcomes: dict[str, str] = {}
    for backend, result in zip(lower, results[:-1]):
        outcome = judge(result, target)
        if outcome not in (Outcome.PASSES, Outcome.FAILS_SAME):
            return GraphLadder(graph, why=f"the graph alone with {backend!r} {_WORDS.get(outcome, outcome.value)}",
                               queries=asked)
        outcomes[backend] = "pass" if outcome is Outcome.PASSES else "fail"
    outcomes[top_backend] = "fail"
    return GraphLadder(graph, outcomes, conclusive=True, queries=asked)

"""The FX minifier driver: reproduce in isolation, reduce to a fixed point, write and verify repro.py.

Contract: `minify_case(initial, context, options, reporter)`
1. fixes the target signature: the recorded one (`options.expected`), or for an accuracy check
   the one signature every repro's check raises; with neither (a signal death) the initial graph
   runs once in the pool and its failure is the target. A known target is confirmed by the first
   candidate that fails with it in isolation (`isolate_ops` runs first); when none does, the
   initial graph runs once, and a different failure there is `CannotReproduce`;
2. tries the graph cut down to `options.start_nodes` first (the first bad kernel's fused nodes), else to
   those nodes with the calls that feed them (`passes` counts it as `kernel_nodes` when one is kept), then
   reduces with `FX_PASSES` until a fixed point (once those first passes have cut the graph, `options.narrowed` is
   told where the nodes left came from: a caller may act on the culprit before the end); Ctrl-C or the deadline
   stop early and keep the best so far (`MinifyResult.stopped_early` says why);
3. writes `repro.py` (its header names the user-level calls and lines the minimal graph came from,
   when the recording knew them) and `minify.json` into `options.out_dir`, runs `python repro.py` in a fresh
   interpreter and reports `verified` only if it failed with the target signature (an interrupted reduction's
   best is verified too, unless `verify_interrupted` is off: a diagnosis being stopped writes it and ends);
4. for a verified repro, asks which of its inputs' recorded properties the failure needs
   (`reduce.input_needs`: each taken away alone, same oracle): `MinifyResult.input_needs`.
The worker pool and the verifying interpreter (`processes.workers`) may be started by the caller
before it has even loaded the graph, so their start-up overlaps the loading.
Nothing here prints: progress goes to the reporter.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from pt2doctor.capture.torch_compat import random_ops
from pt2doctor.model.minify import (
    FailureSignature,
    InputNeed,
    MinifyResult,
    NodeOrigin,
    TensorSpec,
    describe_calls,
    source_calls,
)
from pt2doctor.model.serialize import dumps
from pt2doctor.model.settings import default_jobs
from pt2doctor.model.signature import accuracy_signature
from pt2doctor.processes.fresh import FreshInterpreter, Verification, verify
from pt2doctor.processes.fresh_forks import FreshForks
from pt2doctor.processes.pool import RunResult, WorkerPool
from pt2doctor.processes.workers import Workers, start_workers
from pt2doctor.reduce.core import ProgressReporter, ReductionProblem, ReductionStopped, reduce
from pt2doctor.reduce.fx_case import FxCase, case_key, case_sort_key, effect_calls, op_name
from pt2doctor.reduce.fx_passes import FX_PASSES, isolate_ops, only_nodes
from pt2doctor.reduce.input_needs import probe_input_needs
from pt2doctor.reduce.oracle import FxOracle, ReproContext, script_for, signature_of
from pt2doctor.reduce.repro import render
from pt2doctor.reduce.saved_values import keep_only
from pt2doctor.reduce.short_repro import render_short, render_test


@dataclass(frozen=True, slots=True)
class MinifyOptions:
    out_dir: Path
    jobs: int = field(default_factory=default_jobs)
    timeout_s: float = 120.0
    deadline_s: float | None = None
    expected: FailureSignature | None = None
    graph_name: str = "graph"
    verify: bool = True
    start_nodes: tuple[str, ...] = ()  # try these nodes alone first (the first bad kernel's, `diagnose.runtime_triage`)
    # told where the nodes came from once the first passes (those nodes, the ops the failure names) cut the graph
    narrowed: Callable[[tuple[NodeOrigin, ...]], None] | None = None
    verify_interrupted: bool = True  # verify the best so far of an interrupted reduction (`minify`'s Ctrl-C)


@dataclass(frozen=True, slots=True)
class MinifyOutcome:
    result: MinifyResult
    case: FxCase
    repro_text: str
    verification: Verification | None


class CannotReproduce(RuntimeError):
    def __init__(self, message: str, seen: RunResult) -> None:
        super().__init__(message)
        self.seen = seen


def find_target(pool: WorkerPool, case: FxCase, context: ReproContext,
                expected: FailureSignature | None) -> FailureSignature:
    (result,) = pool.run([render(script_for(case, context))])
    seen = signature_of(result)
    if seen is None or seen.text.startswith("InvalidRepro"):
        how = "it ran without error" if result.status == "ok" else f"{result.status}: {result.text}"
        raise CannotReproduce(f"the graph does not fail in isolation ({how})", result)
    if expected is not None and seen != expected:
        raise CannotReproduce(f"in isolation the graph fails with {seen}, not the recorded {expected}", result)
    return seen


def _known_target(context: ReproContext, options: MinifyOptions) -> FailureSignature | None:
    return options.expected or (accuracy_signature() if context.accuracy else None)


def minify_case(initial: FxCase, context: ReproContext, options: MinifyOptions,
                reporter: ProgressReporter | None = None, *, workers: Workers | None = None) -> MinifyOutcome:
    """Reduce `initial`; `workers` (from `start_workers`) are used and left open when given."""
    started = time.monotonic()
    owned = workers is None
    if workers is None:
        workers = start_workers(options.jobs, options.timeout_s, options.out_dir, verify=options.verify)
    try:
        known = _known_target(context, options)
        target = known or find_target(workers.pool, initial, context, None)
        oracle = FxOracle(workers.pool, context, target)
        problem = ReductionProblem(
            initial, oracle, key=case_key, sort_key=case_sort_key, size=lambda c: c.node_count,
            jobs=workers.pool.jobs, reporter=reporter, deadline_s=options.deadline_s,
            first_failing=oracle.first_failing,
        )
        stopped = None
        try:
            _start_from(problem, options.start_nodes)
            _confirm(problem, workers.pool, context, target, known=known is not None)
            if options.narrowed is not None and problem.current is not problem.initial:
                options.narrowed(problem.current.origins)
            best = reduce(problem, FX_PASSES)
        except ReductionStopped as stop:
            best, stopped = stop.best, stop.reason  # type: ignore[assignment]
        except KeyboardInterrupt:
            best, stopped = problem.current, "interrupted"
        elapsed = time.monotonic() - started
        return _finish(initial, best, problem, target, context, options, stopped, elapsed, workers.verifier,
                       workers.forks)
    finally:
        if owned:
            workers.close()


def _start_from(problem: ReductionProblem[FxCase], nodes: tuple[str, ...]) -> None:
    """The graph cut down to `nodes` (the kernel that went wrong) is the first candidate, and those nodes with
    the calls that feed them the second (what a kernel faults on may come from outside it: an extern kernel's
    output, such as a ZeroTensor without memory): when one fails the same way, the passes start from it rather
    than from the whole graph."""
    if not nodes:
        return
    case, kernel = problem.initial, set(nodes)
    feeding = [f.name for n in case.call_nodes if n.name in kernel for f in n.all_input_nodes
               if f.op == "call_function" and f.name not in kernel]
    starts = [only_nodes(case, nodes), only_nodes(case, (*nodes, *dict.fromkeys(feeding)))]
    problem.pass_name = "kernel_nodes"
    problem.consider_first([start for start in starts if start is not None])


def _confirm(problem: ReductionProblem[FxCase], pool: WorkerPool, context: ReproContext, target: FailureSignature,
             *, known: bool) -> None:
    """A known target is confirmed by any candidate failing with it; else the initial graph must."""
    if not known:
        return
    problem.pass_name = isolate_ops.__name__
    isolate_ops(problem, target.text)
    if problem.current is problem.initial:
        find_target(pool, problem.initial, context, target)
        problem.stats.queries += 1


def _finish(initial: FxCase, best: FxCase, problem: ReductionProblem[FxCase], target: FailureSignature,
            context: ReproContext, options: MinifyOptions, stopped: str | None, elapsed: float,
            verifier: FreshInterpreter | None = None, forks: FreshForks | None = None) -> MinifyOutcome:
    options.out_dir.mkdir(parents=True, exist_ok=True)
    repro_path = options.out_dir / "repro.py"
    calls = source_calls(best.origins)
    if calls:  # the reader learns which of their own calls the minimal graph came from
        came_from = (f"Its {', '.join(dict.fromkeys(best.ops))} came from: "
                     + describe_calls(calls).replace('"' * 3, "'" * 3) + ".",)
        context = replace(context, header=context.header + came_from)
    script = script_for(best, context)
    text = render(script)
    repro_path.write_text(text)
    # (`random_ops` reads the case's `.graph`) the short form then compares what a draw cannot change
    draws = bool(random_ops(best))
    short = _write_if(options.out_dir / "repro_short.py", render_short(script, draws))
    test = _write_if(options.out_dir / "test_repro.py", render_test(script, draws))
    keep_only(options.out_dir, (s.saved for s in best.inputs if isinstance(s, TensorSpec) and s.saved))
    timeout_s = max(options.timeout_s, 60.0)
    verifies = options.verify and (stopped != "interrupted" or options.verify_interrupted)
    verification = (verify(repro_path, target, timeout_s=timeout_s, interpreter=verifier, forks=forks)
                    if verifies else None)
    needs: tuple[InputNeed, ...] = ()
    if verification and verification.verified and stopped != "interrupted":  # what the failure needs of its inputs
        needs = probe_input_needs(best, problem.oracle, context.stage)
    stats = problem.stats
    result = MinifyResult(
        graph=options.graph_name, stage=context.stage, signature=target,
        nodes_before=initial.node_count, nodes_after=best.node_count, ops=best.ops,
        culprit_ops=_culprits(best), queries=stats.queries,
        cache_hits=stats.cache_hits, time_s=round(elapsed, 3),
        verified=bool(verification and verification.verified), repro_path=str(repro_path),
        verify_runs=verification.runs if verification else None, short_repro=short, test_repro=test,
        stopped_early=stopped, passes=tuple(sorted(stats.accepted.items())),
        outcomes=tuple(sorted(stats.outcomes.items())), origins=best.origins, input_needs=needs,
    )
    (options.out_dir / "minify.json").write_bytes(dumps(result, pretty=True))
    return MinifyOutcome(result, best, text, verification)


def _write_if(path: Path, text: str | None) -> str | None:
    if text is None:
        path.unlink(missing_ok=True)  # a short form of an earlier minification in this folder
        return None
    path.write_text(text)
    return str(path)


def _culprits(case: FxCase) -> tuple[str, ...]:
    """The ops of a minimal graph of at most 3 nodes, less the calls every case keeps for their effect on
    global state (functorch's nesting calls): scaffolding, never what failed."""
    effects = set(effect_calls(case.graph))
    return tuple(op_name(n) for n in case.call_nodes if n.name not in effects) if case.node_count <= 3 else ()

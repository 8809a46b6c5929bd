"""Minify the recorded graph that failed, in isolation, and verify the repro (the steps of `diagnose.reduction`).

Contract: `minify_graph(...)` sets `found.minify` (a `MinifyResult`) or adds a note saying why there is
none; it never raises for what the minifier meets (a Ctrl-C in the minifier is re-raised once the best
so far is kept). The graph is the recording's choice (`reduce.fx_load.load_failing`; for a wrong result
the graph `diagnose.wrong_graph` found wrong); when an after-AOT graph does not fail alone (the failure
needs what AOTAutograd or the backend does around it), the Dynamo graph it came from is minified with
the script's own backend instead, and a note says so. When runtime triage named the first bad kernel
of that graph, its fused nodes (named as in the recorded code, `RecordedFailure.case_nodes`) are the
minifier's first candidate (`MinifyOptions.start_nodes`), and a note says whether the minification
started from them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pt2doctor.capture.runner import Reporter
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.options import DiagnoseOptions
from pt2doctor.diagnose.ranks import collectives_of_failing_graph, needs_ranks
from pt2doctor.diagnose.recording import Recording
from pt2doctor.diagnose.stages import REFERENCE

if TYPE_CHECKING:
    from pt2doctor.model.minify import NodeOrigin
    from pt2doctor.model.runtime import KernelFault
    from pt2doctor.processes.workers import Workers


def minify_graph(options: DiagnoseOptions, found: Found, reporter: Reporter, minify_reporter: Any,
                 recording: Recording, workers: Workers | None = None, deadline_s: float | None = None,
                 narrowed: Callable[[tuple[NodeOrigin, ...]], None] | None = None,
                 fault: KernelFault | None = None) -> None:
    """`workers`: the warm ones the stage ladder ran in (`diagnose.narrowing.SideRuns`), else started here;
    `deadline_s`: the reduction's share of the diagnosis's budget (its best so far is kept when it runs out);
    `narrowed`: told where the nodes came from once the minifier's first passes cut the graph (`MinifyOptions`);
    `fault`: the first bad kernel the runtime triage found, whose nodes the minifier starts from in its graph."""
    from pt2doctor.model.minify import Stage
    from pt2doctor.reduce.fx_load import NothingToMinify, load_failing
    from pt2doctor.reduce.fx_minify import CannotReproduce

    reporter.status("minifying the failing graph")
    # the after-AOT graph first; when it does not fail alone (the failure needs what AOTAutograd or
    # the backend does around it), the Dynamo graph it came from, with the script's own backend; a wrong
    # backward graph's Dynamo graph, judged with its backward, first where it is no larger (`_torch_level_first`)
    attempts = [(True, True), (False, False)] if _torch_level_first(recording) else [(False, False), (True, False)]
    for dynamo, grads in attempts:
        last = (dynamo, grads) == attempts[-1]
        try:
            recorded = load_failing(recording.run_dir, accuracy=recording.accuracy, out_dir=options.out_dir,
                                    prefer=recording.prefer, died_of_signal=recording.died_of_signal, dynamo=dynamo,
                                    grads=grads)
            if not dynamo and needs_ranks(found, recorded.graph_id, collectives_of_failing_graph(
                    recording.run_dir, recorded.graph_id, found.session)):
                return
            found.minify = _minify_recorded(options, found, recorded, minify_reporter, workers, deadline_s,
                                            simpler=not dynamo, narrowed=narrowed, fault=fault)
        except CannotReproduce as exc:
            if last or (recorded.context.stage is not Stage.AOT and not grads):
                found.notes.append(f"not minified: {exc}")
                break
            which = "the Dynamo graph, judged with its backward," if grads else "the after-AOT graph"
            found.notes.append(f"{which} is not minified: {exc}")
            reporter.status(f"{which} does not fail alone: minifying the "
                            + ("backward graph" if grads else "Dynamo graph it came from"))
            continue
        except NothingToMinify as exc:
            if grads:  # no Dynamo graph to judge with its backward: the backward graph
                continue
            found.notes.append(f"not minified: {exc}")
        except Exception as exc:  # the diagnosis so far must survive a minifier failure
            found.notes.append(_minifier_failure(exc))
        else:
            if grads:
                found.notes.append(f"minified the Dynamo graph {recorded.graph_id} with its backward (the gradients "
                                   "judged with the outputs): its backward graph failed, and a forward in torch "
                                   "calls whose backward shows it is the shorter repro")
            elif dynamo:
                found.notes.append(f"minified the Dynamo graph {recorded.graph_id} with the script's backend "
                                   f"({recorded.context.backend.name!r}): its after-AOT graph does not fail alone")
        break
    if found.minify:
        m = found.minify
        if m.stopped_early == "interrupted":  # the minifier kept its best; the diagnosis stops here
            raise KeyboardInterrupt
        word = "verified" if m.verified else "NOT verified"
        reporter.status(f"minified {m.nodes_before} -> {m.nodes_after} nodes {list(m.ops)} ({word})")
        if fault is not None and fault.graph == m.graph:
            kernel = f"the first bad kernel ({fault.kernel}, {len(fault.nodes)} node(s))"
            found.notes.append(f"minified from {kernel}, with the calls that feed it where it needs them, rather than "
                               f"from the whole graph of {m.nodes_before}" if dict(m.passes).get("kernel_nodes") else
                               f"{kernel} does not fail the same way cut out of its graph: minified from the whole "
                               f"graph of {m.nodes_before}")


def _torch_level_first(recording: Recording) -> bool:
    """A wrong backward graph whose Dynamo graph is no larger and has a short form (`reduce.short_repro`: no
    higher-order op, a backend by name): that graph judged with its backward (torch calls whose backward shows the
    failure) is minified first, the backward graph (aten ops on saved activations) where it does not fail alone."""
    from pt2doctor.reduce.fx_load import load_failing
    from pt2doctor.reduce.oracle import script_for
    from pt2doctor.reduce.short_repro import render_short

    if not recording.accuracy:
        return False
    load = {"accuracy": True, "prefer": recording.prefer, "died_of_signal": recording.died_of_signal}
    try:
        failing = load_failing(recording.run_dir, **load)  # type: ignore[arg-type]
        if not failing.context.backward:
            return False
        dynamo = load_failing(recording.run_dir, dynamo=True, grads=True, **load)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - no Dynamo graph to go by: the backward graph alone
        return False
    return (len(dynamo.case.call_nodes) <= len(failing.case.call_nodes)
            and render_short(script_for(dynamo.case, dynamo.context)) is not None)


def _minify_recorded(options: DiagnoseOptions, found: Found, recorded: Any, minify_reporter: Any,
                     workers: Workers | None, deadline_s: float | None, simpler: bool,
                     narrowed: Callable[[tuple[NodeOrigin, ...]], None] | None, fault: KernelFault | None) -> Any:
    """Minify `recorded` (a `reduce.fx_load.RecordedFailure`); `simpler`: a Dynamo graph whose failure shows
    with the stage's simpler backend is minified with that backend (faster queries, the stage isolated)."""
    from pt2doctor.model.minify import BackendKind, BackendSpec, Stage
    from pt2doctor.reduce.fx_minify import MinifyOptions, minify_case

    context, expected = recorded.context, recorded.expected
    stage_backend = next((b for b, s in REFERENCE if s == found.stage), None)
    if simpler and stage_backend and context.stage is Stage.DYNAMO and context.backend.kind is BackendKind.NAMED:
        context, expected = replace(context, backend=BackendSpec(BackendKind.NAMED, stage_backend)), None
    start = recorded.case_nodes(fault.nodes) if fault is not None and fault.graph == recorded.graph_id else ()
    # a diagnosis stopped (Ctrl-C, SIGTERM, its budget) writes the minifier's best and ends: not verified
    minify_options = MinifyOptions(options.out_dir, options.jobs, options.query_timeout_s, deadline_s=deadline_s,
                                   expected=expected, graph_name=recorded.graph_id, start_nodes=start,
                                   verify_interrupted=False, narrowed=narrowed)
    return minify_case(recorded.case, context, minify_options, minify_reporter, workers=workers).result


def _minifier_failure(exc: Exception) -> str:
    if isinstance(exc, AttributeError) and "_OpNamespace" in str(exc):
        return (f"not minified: the graph calls a custom op that the script defines ({exc}); a standalone repro "
                "cannot define it")
    if "index_to_user_object" in str(exc) or "User object is no longer alive" in str(exc):
        return ("not minified: the graph reads objects (streams, events) that Dynamo hands it through its own "
                "side table as the compiled code runs, which a graph run alone does not have")
    return f"the minifier failed: {type(exc).__name__}: {exc}"

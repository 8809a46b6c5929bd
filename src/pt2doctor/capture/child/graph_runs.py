"""What the graph recorder wraps around a compiled graph's calls: failures and accuracy, per graph.

Contract: each wrapper returns a callable with the compiled one's calling convention (`_boxed_call`
kept) and records into `recorder` (a `capture.child.graph_recorder.GraphRecorder`):
- `runtime_checked`: a Dynamo graph's compiled callable; an exception it raises is a `run` failure
  of the graph, with the inputs it was called with;
- `accuracy_checked`: its first call is judged against `eager` by the accuracy rule
  (`torch_compat.accuracy_rule`, fp64-referenced, on copies of the inputs); a mismatch is an
  `accuracy` failure with the inputs as they were before the call;
- `aot_checked`: a compiled after-AOT graph (AOTAutograd calls it boxed or not as its compiler
  said; a backward graph with the saved activations and the tangents), both of the above at once.
  A forward graph's outputs include the activations it saves for the backward, which no Dynamo-level
  check sees. A backward graph's exception is tagged with its compile id
  (`call_counter.mark_raised_by`): it comes out of `loss.backward()`, far from the compiled forward
  call that would otherwise tag it. It unwraps as `functools.wraps` says (`__wrapped__`), as AOTAutograd's
  cache entries do.
A boxed call empties the list it is given (AOTAutograd steals the saved activations to free them
early), so the inputs are read before the call; holding them for the call's length keeps those
activations alive a little longer, a cost paid only in the failure workflows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from pt2doctor.capture import torch_compat
from pt2doctor.capture.child.call_counter import mark_raised_by
from pt2doctor.model.recording import FailurePhase


class Recorder(Protocol):
    def mark(self, text: str) -> None: ...
    def running(self, graph_id: str, inputs: Sequence[Any]) -> None: ...
    def ran(self, graph_id: str) -> None: ...
    def fail(self, graph: str, phase: FailurePhase, exc: BaseException, inputs: Sequence[Any] = ()) -> None: ...
    def fail_accuracy(self, graph: str, tolerance: float, inputs: Sequence[Any]) -> None: ...


def runtime_checked(recorder: Recorder, graph_id: str, compiled: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        recorder.running(graph_id, args)
        try:
            return compiled(*args, **kwargs)
        except Exception as exc:
            recorder.fail(graph_id, "run", exc, args)
            raise
        finally:
            recorder.ran(graph_id)

    return _same_convention(run, compiled)


def accuracy_checked(recorder: Recorder, graph_id: str, eager: Any, compiled: Callable[..., Any],
                     tolerance: float) -> Callable[..., Any]:
    """`compiled`, judged against `eager` (fp64-referenced) on its first call."""
    state = {"checked": False}

    def run(*args: Any) -> Any:
        if state["checked"]:
            return compiled(*args)
        state["checked"] = True
        # Dynamo calls a backend's result with the graph's inputs, unboxed (whatever `_boxed_call` says)
        return judged_call(recorder, graph_id, eager, list(args), lambda: compiled(*args), tolerance)

    return _same_convention(run, compiled)


def judged_call(recorder: Recorder, graph_id: str, eager: Any, inputs: list[Any], call: Callable[[], Any],
                tolerance: float) -> Any:
    """`call()` (the compiled graph on `inputs`), judged against `eager` on copies of `inputs`; the fp64 reference
    runs only where an output is not allclose (`torch_compat.same_as_fp64_reference`). A call that cannot be judged
    (`torch_compat.judgeable`: fake inputs, a tracing mode) is made unjudged, and a judgement that raises judges
    nothing: the check never changes what the program computes or raises."""
    if not torch_compat.judgeable(inputs):
        return call()
    try:
        expected, _ = torch_compat.reference_runs(eager, inputs, fp64=False)
    except Exception:  # eager itself fails: nothing to judge against
        return call()
    state, before = torch_compat.rng_state(), torch_compat.copy_inputs(inputs)  # the call's, before it
    actual = call()
    try:
        same = torch_compat.same_as_fp64_reference(eager, before, expected, actual, tolerance, state=state)
    except Exception:
        return actual
    if not same:
        recorder.fail_accuracy(graph_id, tolerance, before)
    return actual


def aot_checked(recorder: Recorder, graph_id: str, compile_id: str | None, compiled: Callable[..., Any],
                     eager: Any, tolerance: float | None) -> Callable[..., Any]:
    """A compiled after-AOT graph (see the contract); judged on its first call when `eager` is given."""
    boxed = bool(getattr(compiled, "_boxed_call", False))
    state = {"judge": eager is not None}

    def run(*args: Any) -> Any:
        inputs = list(args[0]) if boxed and args else list(args)  # before a boxed call empties its list
        recorder.mark(f"{graph_id} run")
        try:
            if state["judge"]:
                state["judge"] = False
                return judged_call(recorder, graph_id, eager, inputs, lambda: compiled(*args), tolerance)  # type: ignore[arg-type]
            return compiled(*args)
        except Exception as exc:
            recorder.fail(graph_id, "run", exc, inputs)
            mark_raised_by(exc, compile_id)  # None for a forward graph: its Dynamo graph's call tags it
            raise
        finally:
            recorder.ran(graph_id)

    run = _same_convention(run, compiled)
    # where AOTAutograd's cache is on (`graph_recorder.install(keep_aot_cache=True)`), a bundled cache entry takes
    # the compiled graph itself from under the wrappers around it; an unbundled one is not written for a callable
    # without Inductor's cache key, such as this one
    run.__wrapped__ = compiled  # type: ignore[attr-defined]
    return run


def _same_convention(run: Callable[..., Any], compiled: Callable[..., Any]) -> Callable[..., Any]:
    if getattr(compiled, "_boxed_call", False):
        run._boxed_call = True  # type: ignore[attr-defined]
    return run

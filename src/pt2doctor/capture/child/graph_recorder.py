"""Record what a minifier needs while the user's program runs: graphs, inputs' metadata, failures.

`install(out_dir)` hooks in (through `torch_compat`) and returns the function that uninstalls.
Layout of `out_dir/graphs/` (read back by `reduce.fx_load`):
- `index.jsonl`: one `GraphEntry` (`model.recording`) per graph, in compile order: its id (`g0003`),
  stage, compile id, Dynamo parent (an after-AOT graph), AOT kind, backend, config lines, inputs'
  specs, node count, each call node's provenance (the user's call and line, `torch_compat.node_origin`),
  the grad mode it was compiled under (an eval step's `torch.no_grad()`: its repro runs so) and the files below.
- `g0003.py`: the graph as Python (FX import block + `def forward(self, ...)`).
- `g0003.<name>.py`: each graph submodule it reaches by get_attr (a higher-order op's branches:
  torch.cond, autograd.Function, checkpoint), nested ones under dotted names, as code too.
- `g0003.constants.pt`: get_attr tensors (torch.save; submodules' under dotted names), only when
  there are any. Tensors only, so `torch.load(weights_only=True)` reads them back.
- `g0003.inputs.pt`, `g0003.call.inputs.pt`, `g0003.failed.inputs.pt`: real input values (the one format of
  `capture.input_values`: `{"arg<i>": CPU tensor}`), only where they matter (below), one file per moment
  they were kept (`model.recording.values_files`), each written whole or not at all.
- `unrecorded.jsonl` (only where there is one): an `Unrecorded` per graph the recorder could not write; that graph
  is compiled as if no recorder were installed (observing never changes the program) and is in no other file.
- `failures.jsonl`: one `GraphFailure` per failure: graph, phase (`compile`, `run`, `accuracy`),
  `Type: first line` (an accuracy failure also has its tolerance; one whose inputs were saved, `values`).
- `inflight`: a 256-byte memory-mapped record `"g0003 run"` of what is compiling or running; when
  nothing is, `"g0003 ran"`, the graph whose run ended last (blank before any ran). A MAP_SHARED
  page survives the process dying of a signal without an fsync per call, so after a segfault the
  parent still knows the culprit graph; and after an abort with nothing in flight, the graph that
  most likely wrote past a buffer's end: glibc finds a corrupted heap at a later `free`, after the
  kernel returned (or at the interpreter's teardown).

Contract: recording is metadata and code, so the overhead goal of `run` holds when nothing fails;
tensor values are kept only where they matter and are cheap to keep:
- when a graph is recorded, its integer/bool tensor inputs (indices, masks: random stand-ins are
  zeros, which hide index bugs), as many as fit in `INDEX_VALUES_BYTES`. They are the only values
  a process that dies of a signal leaves behind. Dynamo hands a backend real tensors; AOTAutograd
  hands Inductor fake ones, so an after-AOT graph has none and uses its Dynamo parent's
  (`reduce.fx_load`);
- when a Dynamo graph fails (its backend raises; its compiled callable raises; the accuracy check
  below rejects it), all its tensor inputs as they were then, as many as fit in
  `FAILURE_VALUES_BYTES`, once per graph (a run-time failure sees them after any in-place change
  the failing call made);
- in the failure workflows (`every_aot_graph`), each Dynamo graph's inputs before its first compiled
  call, within the same budget: a kernel that kills the process (a segfault, a CUDA device-side
  assert and its abort) leaves no failure record, and without these its repro had random inputs.
  Under `pt2doctor accuracy` a graph its probe judges wrong is one: the probe hands the inputs it
  judged to `keep_failing_inputs`, so nothing is judged twice.
The Dynamo graphs of the compile ids in `install(..., run_eagerly=)` (the child spec's
`record_run_eagerly`) are recorded and then run as captured, their backend never called (`diagnose`
asks which of several wrong graphs the program's own check depends on).
With an accuracy tolerance (`install(..., accuracy_tolerance=)`; in a run, the child spec's
`record_accuracy_tolerance`), each Dynamo graph's first call is also judged
by the accuracy rule (`torch_compat.accuracy_rule`: eager on copies of the inputs, in fp32 and fp64, RNG state restored
so the program computes what it would have); a mismatch is recorded as an `AccuracyMismatch` failure
of that graph. AOTAutograd's cache: a hit skips Inductor's inner compile, and with it the
after-AOT graph. With `every_aot_graph` (the child spec's `record_every_aot_graph`; the failure workflows,
`diagnose` and `minify --script`, ask for it) the cache is off while recording, so every after-AOT
graph is seen, unless `keep_aot_cache` (the child spec's `record_keeps_aot_cache`: diagnose's first run, where
tracing every cached graph again cost 1.5 s of a 6 s ResNet run): then what the cache misses is recorded, wrapped
and judged as with the cache off (a wrapped graph is then not written to it), and what it serves as without
`every_aot_graph`. Without it (`run --record`, which must stay cheap: with the cache off a warm GPT-2
run cost 1.19x instead of 1.03x, bench/results/overhead-*) the cache stays on; a compile failure
is never a cache hit, so it is still recorded after AOT, while a run-time or accuracy failure of
a cached graph is minified from its Dynamo graph (a verified repro at the torch level). A Dynamo graph whose
after-AOT graphs the cache served is said in `cached.jsonl` (`model.recording.Cached`): where the failure is a
served graph's or no recorded graph shows it, `diagnose` records again with the cache off. Inductor's own FX
graph cache stays on either way.
Backward graphs: every `aot_autograd` backend's (Inductor's, `aot_eager`'s, a user's
`aot_autograd(bw_compiler=...)`) is recorded when its backward compiler is called
(`torch_compat.patch_aot_compilers`), lazily at the first `backward()` with the forward's compile
context restored: an AOT entry of kind `backward`, its compile id and Dynamo `parent` the forward's,
the parent's backend (whose `bw_compiler` the repro calls), its (fake) inputs' metadata. A failure
of its compile (or of its run, below) is that graph's, and the exception is tagged with its compile
id (`call_counter.mark_raised_by`), so the run's failure is the compiled graph's (a backend
failure), not Dynamo's. In the failure workflows (`every_aot_graph`) and under an accuracy
tolerance, after-AOT graphs' compiled callables are wrapped (`capture.child.graph_runs`) and
AOTAutograd's cache is off (a wrapped result is no cacheable `OutputCode`): a backward graph's run
failure keeps its real inputs (saved activations, tangents); with a tolerance its first call is
judged against eager on them, and so is each Inductor forward graph's, whose outputs include the
activations it saves for the backward (a wrong saved mask is a wrong gradient with a right loss);
where it fails, its Dynamo graph's failure in the same call is left out (the after-AOT one is the
more precise, and one wrong graph per compile keeps `diagnose` from testing which one matters).
Backends: see `capture.child.backend_source` (a registered name is kept as a
name; a user's backend as standalone source with what it needs from its module, or a stub).
Inputs' metadata and saved values: `capture.child.graph_inputs`.
"""

from __future__ import annotations

import itertools
import mmap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pt2doctor.capture import torch_compat
from pt2doctor.capture.child.backend_source import backend_spec, callable_backend_spec  # noqa: F401 (re-exported)
from pt2doctor.capture.child.call_counter import mark_raised_by
from pt2doctor.capture.child.graph_inputs import input_specs
from pt2doctor.capture.child.graph_modules import graph_copy, save_constants, submodules
from pt2doctor.capture.child.graph_runs import accuracy_checked, aot_checked, runtime_checked
from pt2doctor.capture.input_values import save_values
from pt2doctor.capture.process_meta import is_user_file
from pt2doctor.model.minify import ACCURACY_MESSAGE, ACCURACY_TYPE, BackendKind, BackendSpec, Stage
from pt2doctor.model.recording import AotKind, Cached, FailurePhase, GraphEntry, GraphFailure, Unrecorded, values_files
from pt2doctor.model.serialize import append_line

MARKER_SIZE = 256
INDEX_VALUES_BYTES = 16 << 20
FAILURE_VALUES_BYTES = 1 << 30
_installed: GraphRecorder | None = None  # the recorder `install` started in this process


class GraphRecorder:
    def __init__(self, out_dir: Path, *, keep_call_inputs: bool = False) -> None:
        self.keep_call_inputs = keep_call_inputs  # save each Dynamo graph's inputs before its first call
        self.called: set[str] = set()
        self.dir = out_dir / "graphs"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.index = open(self.dir / "index.jsonl", "a", buffering=1)  # noqa: SIM115 (kept open: close() closes)
        self.failures = open(self.dir / "failures.jsonl", "a", buffering=1)  # noqa: SIM115 (as above)
        self.counter = itertools.count()
        self.current_dynamo: str | None = None
        self.dynamo_by_compile_id: dict[str, str] = {}
        self.backends: dict[str, BackendSpec | None] = {}  # a Dynamo graph's backend, by graph id
        self.compiling_backward = False
        self.last_aot: str | None = None  # the after-AOT graph recorded last
        self.compile_ids: dict[str, str | None] = {}  # every graph's, by graph id
        self.wrong_after_aot: set[str] = set()  # compile ids whose after-AOT graph failed the accuracy check
        self.failed_with_values: set[str] = set()
        self.last_ran = ""  # the marker's text when nothing is in flight
        marker = self.dir / "inflight"
        marker.write_bytes(b" " * MARKER_SIZE)
        self._marker_file = open(marker, "r+b")  # noqa: SIM115 (mapped while recording: close() closes)
        self.marker = mmap.mmap(self._marker_file.fileno(), MARKER_SIZE)

    def mark(self, text: str) -> None:
        self.marker[:] = text.encode()[:MARKER_SIZE].ljust(MARKER_SIZE)

    def running(self, graph_id: str, inputs: Sequence[Any]) -> None:
        """`graph_id`'s compiled call starts; before its first, its inputs are saved where asked (a kernel
        that kills the process leaves no failure record, and so no values, behind)."""
        if self.keep_call_inputs and graph_id not in self.called:
            self.called.add(graph_id)
            _save(inputs, self.dir / values_files(graph_id)[1], FAILURE_VALUES_BYTES)
        self.mark(f"{graph_id} run")

    def ran(self, graph_id: str) -> None:
        """`graph_id`'s call ended: nothing in flight, and it is the graph that ran last."""
        self.last_ran = f"{graph_id} ran"
        self.idle()

    def idle(self) -> None:
        """Nothing in flight: the marker names the graph that ran last, if any."""
        self.mark(self.last_ran)

    def cached(self, graph_id: str) -> None:
        """AOTAutograd's cache served the after-AOT graphs of Dynamo graph `graph_id`: none of them is recorded."""
        with open(self.dir / "cached.jsonl", "a") as cached:
            append_line(cached, Cached(graph_id))

    def fail(self, graph: str, phase: FailurePhase, exc: BaseException, inputs: Sequence[Any] = ()) -> None:
        self._write_failure(graph, phase, _described(exc), None, inputs)

    def fail_accuracy(self, graph: str, tolerance: float, inputs: Sequence[Any]) -> None:
        """An accuracy failure of `graph`; a Dynamo graph's is left out where its after-AOT forward graph,
        judged inside the same call on all its outputs, already failed: that one is the more precise."""
        compile_id, dynamo = self.compile_ids.get(graph), graph in self.backends
        if dynamo and compile_id in self.wrong_after_aot:
            return
        if not dynamo and compile_id is not None:
            self.wrong_after_aot.add(compile_id)
        self._write_failure(graph, "accuracy", f"{ACCURACY_TYPE}: {ACCURACY_MESSAGE}", tolerance, inputs)

    def _write_failure(self, graph: str, phase: FailurePhase, description: str, tolerance: float | None,
                       inputs: Sequence[Any]) -> None:
        """One line of failures.jsonl; the graph's real inputs are saved with its first failure."""
        values = None
        if inputs and graph not in self.failed_with_values:
            self.failed_with_values.add(graph)
            values = _save(inputs, self.dir / values_files(graph)[2], FAILURE_VALUES_BYTES)
        append_line(self.failures, GraphFailure(graph, phase, description, tolerance, values))

    def save(self, stage: Stage, gm: Any, example_inputs: Any, backend: BackendSpec | None,
             aot_kind: AotKind | None, parent: str | None = None) -> str | None:
        """Record a graph; an after-AOT graph's `parent` is the Dynamo graph compiling now unless given.
        None where it could not be recorded: observing never changes the program, so a graph this recorder
        cannot write is compiled as if no recorder were installed (and is missing from the index)."""
        try:
            return self._write(stage, gm, example_inputs, backend, aot_kind, parent)
        except Exception as exc:
            with open(self.dir / "unrecorded.jsonl", "a") as unrecorded:
                append_line(unrecorded, Unrecorded(stage, torch_compat.current_compile_id(), _described(exc)))
            return None

    def _write(self, stage: Stage, gm: Any, example_inputs: Any, backend: BackendSpec | None,
               aot_kind: AotKind | None, parent: str | None) -> str:
        import torch

        graph_id = f"g{next(self.counter):04d}"
        (self.dir / f"{graph_id}.py").write_text(torch_compat.fx_module_source(gm))
        entry = GraphEntry(
            id=graph_id, stage=stage, compile_id=torch_compat.current_compile_id(),
            parent=(parent or self.current_dynamo) if stage is Stage.AOT else None, aot_kind=aot_kind, backend=backend,
            config=tuple(torch_compat.config_lines()), inputs=tuple(input_specs(gm, example_inputs)),
            nodes=sum(1 for n in gm.graph.nodes if n.op.startswith("call_")),
            constants=save_constants(gm, self.dir / f"{graph_id}.constants.pt"),
            submodules=self._save_submodules(gm, graph_id),
            values=_save(example_inputs, self.dir / values_files(graph_id)[0], INDEX_VALUES_BYTES, indices_only=True),
            origins=tuple(torch_compat.node_origin(n, is_user_file) for n in gm.graph.nodes
                          if n.op.startswith("call_")),
            grad_enabled=torch.is_grad_enabled(),
        )
        append_line(self.index, entry)
        self.compile_ids[graph_id] = entry.compile_id
        if stage is Stage.DYNAMO and entry.compile_id:
            self.dynamo_by_compile_id[entry.compile_id] = graph_id
        if stage is Stage.DYNAMO:
            self.backends[graph_id] = backend
        else:
            self.last_aot = graph_id
        return graph_id

    def _save_submodules(self, gm: Any, graph_id: str) -> dict[str, str]:
        """The graph modules `gm` reaches by get_attr (a higher-order op's branches), nested ones
        too, each as code like the graph itself (`<id>.<name>.py`): {qualified name: file}, parents first."""
        files = {}
        for name, sub in submodules(gm):
            files[name] = f"{graph_id}.{name}.py"
            (self.dir / files[name]).write_text(torch_compat.fx_module_source(sub))
        return files

    def close(self) -> None:
        self.mark("")
        self.marker.close()
        self._marker_file.close()
        self.index.close()
        self.failures.close()


def _described(exc: BaseException) -> str:
    """`Type: first line` of what `exc` (a backend's, unwrapped from Dynamo's) says."""
    inner = torch_compat.unwrap_backend_exception(exc)
    lines = [line.strip() for line in str(inner).splitlines() if line.strip()]
    return f"{type(inner).__name__}: {lines[0] if lines else ''}"


def last_after_aot_graph() -> str | None:
    """The id of the after-AOT graph the installed recorder saved last (the one Inductor compiles now)."""
    return _installed.last_aot if _installed is not None else None


def keep_failing_inputs(compile_id: str, tolerance: float, inputs: Sequence[Any]) -> None:
    """The accuracy probe (`capture.child.accuracy_probe`) judged the graph of `compile_id` wrong on
    `inputs`: where a recorder is installed, they are kept as its own accuracy failure's are."""
    recorder = _installed
    graph_id = recorder.dynamo_by_compile_id.get(compile_id) if recorder is not None else None
    if graph_id is not None:
        recorder.fail_accuracy(graph_id, tolerance, inputs)  # type: ignore[union-attr]


def install(out_dir: Path, *, accuracy_tolerance: float | None = None, every_aot_graph: bool = False,
            keep_aot_cache: bool = False, run_eagerly: Sequence[str] = ()) -> Callable[[], None]:
    """Start recording into `out_dir/graphs/`; returns the uninstall function."""
    recorder = GraphRecorder(Path(out_dir), keep_call_inputs=every_aot_graph)
    tolerance = accuracy_tolerance
    # Wrapping an after-AOT graph's compiled callable makes Inductor's result no cacheable `OutputCode`,
    # so it is wrapped only where AOTAutograd's cache is off (below).
    check_aot_runs = every_aot_graph or tolerance is not None
    global _installed
    _installed = recorder

    def on_backend_call(original: Callable[..., Any], output_graph: Any, gm: Any, example_inputs: Any) -> Any:
        graph_id = recorder.save(Stage.DYNAMO, gm, example_inputs, backend_spec(output_graph.compiler_fn), None)
        if torch_compat.current_compile_id() in run_eagerly:  # what the program computes without this graph's backend
            return gm.forward
        if graph_id is None:
            return original(output_graph, gm, example_inputs)
        outer, recorder.current_dynamo = recorder.current_dynamo, graph_id
        recorder.mark(f"{graph_id} compile")
        eager = graph_copy(gm) if tolerance is not None else None  # the backend may rewrite gm
        served = torch_compat.aot_cache_hits()
        try:
            compiled = original(output_graph, gm, example_inputs)
        except Exception as exc:
            recorder.fail(graph_id, "compile", exc, example_inputs)  # Dynamo's example inputs are real
            raise
        finally:
            recorder.current_dynamo = outer
            recorder.idle()
        if torch_compat.aot_cache_hits() > served:
            recorder.cached(graph_id)
        if eager is not None:
            compiled = accuracy_checked(recorder, graph_id, eager, compiled, tolerance)  # type: ignore[arg-type]
        return runtime_checked(recorder, graph_id, compiled)

    def on_inductor_compile(original: Callable[..., Any], gm: Any, example_inputs: Any, *args: Any,
                            **kwargs: Any) -> Any:
        if recorder.compiling_backward:  # recorded by `on_backward_compile`, its failure too
            return original(gm, example_inputs, *args, **kwargs)
        kind: AotKind = "backward" if kwargs.get("is_backward") else \
            "inference" if kwargs.get("is_inference") else "forward"
        graph_id = recorder.save(Stage.AOT, gm, example_inputs, BackendSpec(BackendKind.NAMED, "inductor"), kind)
        if graph_id is None:
            return original(gm, example_inputs, *args, **kwargs)
        recorder.mark(f"{graph_id} compile")
        try:
            return original(gm, example_inputs, *args, **kwargs)
        except Exception as exc:
            recorder.fail(graph_id, "compile", exc)
            raise
        finally:
            recorder.idle()

    def on_aot_compile(kind: AotKind, original: Callable[..., Any], gm: Any, example_inputs: Any) -> Any:
        if kind == "backward":
            return on_backward_compile(original, gm, example_inputs)
        if tolerance is None or kind == "inference":  # an inference graph's outputs are its Dynamo graph's
            return original(gm, example_inputs)
        eager, before = graph_copy(gm), recorder.last_aot
        compiled = original(gm, example_inputs)
        graph_id = recorder.last_aot
        # not Inductor: its Dynamo graph's check judges what the program sees
        if graph_id == before or graph_id is None:
            return compiled
        # its saved activations too, which only the backward reads: a wrong one is a wrong gradient
        return aot_checked(recorder, graph_id, None, compiled, eager, tolerance)

    def on_backward_compile(original: Callable[..., Any], gm: Any, example_inputs: Any) -> Any:
        compile_id = torch_compat.current_compile_id()  # the forward's: AOTAutograd restores its context
        parent = recorder.dynamo_by_compile_id.get(compile_id or "")
        graph_id = recorder.save(Stage.AOT, gm, example_inputs, recorder.backends.get(parent or ""), "backward", parent)
        if graph_id is None:
            return original(gm, example_inputs)
        eager = graph_copy(gm) if tolerance is not None else None  # the compiler may rewrite gm
        recorder.mark(f"{graph_id} compile")
        recorder.compiling_backward = True
        try:
            compiled = original(gm, example_inputs)
        except Exception as exc:
            recorder.fail(graph_id, "compile", exc)  # its inputs are fake: no values to keep
            mark_raised_by(exc, compile_id)  # it surfaces from `backward()`, not from a compiled call
            raise
        finally:
            recorder.compiling_backward = False
            recorder.idle()
        if not check_aot_runs:
            return compiled
        return aot_checked(recorder, graph_id, compile_id, compiled, eager, tolerance)

    restores = [torch_compat.patch_backend_call(on_backend_call),
                torch_compat.patch_inductor_inner_compile(on_inductor_compile),
                torch_compat.patch_aot_compilers(on_aot_compile)]
    if check_aot_runs and not keep_aot_cache:
        restores.append(torch_compat.disable_aot_autograd_cache())

    def uninstall() -> None:
        global _installed
        for restore in reversed(restores):
            restore()
        recorder.close()
        _installed = None

    return uninstall


def _save(inputs: Sequence[Any], path: Path, budget: int, *, indices_only: bool = False) -> str | None:
    """The file's name (a record names it), or None when nothing was saved."""
    return path.name if save_values(inputs, path, budget=budget, indices_only=indices_only) else None

"""Load what `capture.child.graph_recorder` wrote under `RUN_DIR/graphs/` and pick the graph to minify.

Contract: `load_failing(run_dir)` returns a `RecordedFailure` (the graph as an `FxCase`, how to
compile it, the recorded signature when there is one) or raises `NothingToMinify`; `load_compile(run_dir,
compile_id)` does the same for a graph another check blamed (`pt2doctor accuracy`'s probe): that Dynamo
compile's graph, or with Inductor its forward/inference AOT graph (rule 1's blame), against the
fp64-referenced accuracy check, with no expected signature. `load_failing`'s choice:
1. a recorded exception: an after-AOT graph is preferred over the Dynamo graph it came from (the
   exception passes through both), and a run-time failure of a Dynamo graph compiled by Inductor
   is blamed on its forward/inference AOT graph;
2. no recorded exception but the `inflight` marker names a graph in flight: the process died of a
   signal while compiling or running it (the signal itself is observed again in the worker); with
   `died_of_signal` (the caller saw the process die of one) and nothing in flight, the graph that ran
   last: a kernel that wrote past a buffer's end kills the process at a later `free`, after it returned;
   then a recorded accuracy failure (a run recorded with its graphs judged that raised nothing);
   A recorded accuracy failure (the recorder's fp64-referenced check) makes the context an
   accuracy check with the recorded tolerance, without `accuracy=True`;
3. otherwise `NothingToMinify`, unless `accuracy=True` (a wrong result): then a graph the recorder's
   accuracy check rejected (with the values it was judged on; `prefer`, else the last one), else
   the last graph, is minified against the fp64-referenced accuracy check (the oracle confirms it).
A backward graph (`aot_kind` "backward", recorded when AOTAutograd compiled it) is blamed like any
after-AOT graph; its context says `backward`, so the repro compiles it the way the backend's
`bw_compiler` did, and only its own saved values are used (its inputs are not its parent's).
A recorded failure that is only a wrapper (`SubprocException` from Inductor's compile workers)
gives no expected signature: the first isolated run of the graph fixes the target.
Input values the recorder kept (`<id>.inputs.pt`: the graph's own, or for an after-AOT graph,
whose inputs were fake, its Dynamo parent's at the positions AOTAutograd gave them; so is whether
an input is a ZeroTensor) are saved
beside the repro with `load_failing(..., out_dir=)` (`reduce.saved_values`, as the API does), and
the specs name them; without `out_dir` every input is random.
Each call node's recorded provenance (`GraphEntry.origins`) is matched back to the loaded graph's
nodes (`origins_by_node`), so a minimal case names the user's calls it came from.
A graph's branch submodules (higher-order ops) are read from their recorded code and traced
(`torch_compat.graph_module`: every op a node, also one no input feeds), never unpickled; Inductor's random prims are
registered first. Only `graphs/` is needed (its `GraphEntry`/`GraphFailure` records, `model.recording`; a line that is
not one raises `RecordError`); `session.json` is not read.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import torch
import torch.fx

from pt2doctor.capture.input_values import load_values
from pt2doctor.capture.torch_compat import (
    graph_module,
    opaque_calls,
    qualified_name,
    register_inductor_prims,
    torch_ops_called,
)
from pt2doctor.model.minify import (
    ACCURACY_TYPE,
    DEFAULT_TOLERANCE,
    BackendKind,
    BackendSpec,
    FailureSignature,
    InputSpec,
    NodeOrigin,
    Stage,
    TensorSpec,
)
from pt2doctor.model.recording import GraphEntry, GraphFailure, read_failures, read_index, values_files
from pt2doctor.model.signature import from_description
from pt2doctor.reduce.fx_case import CALL_OPS, FxCase, initial_case, make_base, op_name
from pt2doctor.reduce.oracle import ReproContext
from pt2doctor.reduce.saved_values import save_repro_inputs, with_node_values

_T = TypeVar("_T")


class NothingToMinify(RuntimeError):
    pass


@dataclass(frozen=True)
class RecordedFailure:
    graph_id: str
    case: FxCase
    context: ReproContext
    expected: FailureSignature | None
    names: dict[str, str] = field(default_factory=dict)  # a node's name in the recorded code -> in `case`

    def case_nodes(self, recorded: tuple[str, ...]) -> tuple[str, ...]:
        """Nodes named as the compiler named them (a kernel's origins), as `case` names them."""
        return tuple(self.names.get(name, name) for name in recorded)


Entries = dict[str, GraphEntry]  # by id, in compile order


def load_graph_module(graphs: Path, entry: GraphEntry) -> torch.fx.GraphModule:
    """The recorded graph, its graph submodules (a higher-order op's branches) built from their
    code first, innermost first, and set as its attributes with its constants (tensors only)."""
    register_inductor_prims()  # an after-AOT graph with dropout calls prims.inductor_seeds & co
    constants = torch.load(graphs / entry.constants, weights_only=True) if entry.constants else {}
    submodules: dict[str, Any] = {}
    for name, file in sorted(entry.submodules.items(), key=lambda item: -item[0].count(".")):
        submodules[name] = _module_from_code(graphs / file, name, {**constants, **submodules})
        for placeholder in (n for n in submodules[name].graph.nodes if n.op == "placeholder"):
            placeholder.type = None  # FakeTensor annotations: nothing a repro should need to import
        submodules[name].recompile()
    return _module_from_code(graphs / f"{entry.id}.py", "", {**constants, **submodules})


def _module_from_code(path: Path, name: str, attributes: dict[str, Any]) -> torch.fx.GraphModule:
    """The FX code in `path` traced as a module whose attributes are those of `attributes` (qualified
    names) directly under `name` ("" for the graph itself)."""
    code = path.read_text()
    namespace: dict[str, Any] = {}
    exec(compile(code, path.name, "exec"), namespace)
    module = type("Recorded", (torch.nn.Module,), {"forward": namespace["forward"]})()
    prefix = f"{name}." if name else ""
    for qualified, value in attributes.items():
        attribute = qualified.removeprefix(prefix)
        if qualified.startswith(prefix) and "." not in attribute:
            setattr(module, attribute, value)
    return graph_module(module, torch_ops_called(code) + opaque_calls(code))


def _choose(entries: Entries, failures: list[GraphFailure], inflight: str,
            died_of_signal: bool) -> tuple[str, str | None]:
    """(graph id, recorded description or None for a signal death). What the run ended with comes first: an
    exception a graph raised, then a graph in flight when the process died; a wrong result the recorder's
    accuracy check found only after both (a run that crashed may have judged a graph wrong on its way)."""
    raised = [f for f in failures if f.phase != "accuracy"]
    if raised:
        return _last(entries, raised)
    if inflight and (died_of_signal or not inflight.endswith(" ran")):
        return _blame_aot(entries, inflight.split()[0]), None
    if failures:
        return _last(entries, failures)
    raise NothingToMinify("no graph failed in this run (use --accuracy to look for wrong results)")


def _last(entries: Entries, failures: list[GraphFailure]) -> tuple[str, str | None]:
    """The run ended with its last failure (earlier ones were caught by the script); the same error is recorded by
    the Dynamo graph and by the AOT graph inside it: blame the AOT one, the more precise."""
    last = failures[-1]
    same = [f for f in failures if f.description == last.description]
    failure = next((f for f in reversed(same) if _entry(entries, f.graph).stage is Stage.AOT), last)
    return _blame_aot(entries, failure.graph), failure.description


def _entry(entries: Entries, graph_id: str) -> GraphEntry:
    """The index entry of a graph another record names (a failure, the inflight marker)."""
    if graph_id not in entries:
        raise NothingToMinify(f"the recording names graph {graph_id!r}, which its index does not hold")
    return entries[graph_id]


def _blame_aot(entries: Entries, graph_id: str) -> str:
    if _entry(entries, graph_id).stage is Stage.AOT:
        return graph_id
    children = [e.id for e in entries.values() if e.parent == graph_id and e.aot_kind != "backward"]
    return children[-1] if children else graph_id


def load_failing(run_dir: Path, *, accuracy: bool = False, tolerance: float = DEFAULT_TOLERANCE,
                 out_dir: Path | None = None, prefer: str | None = None, died_of_signal: bool = False,
                 dynamo: bool = False, grads: bool = False) -> RecordedFailure:
    """See the module docstring; `dynamo`: instead of the chosen after-AOT graph, the Dynamo graph it came
    from, compiled with the script's own backend (for when the after-AOT graph does not fail alone); with `grads`,
    a backward graph's too, judged with its backward (`ReproScript.grads`): a wrong gradient shows there."""
    graphs, entries, failures = _read_run(run_dir)
    inflight = ((graphs / "inflight").read_bytes().decode(errors="replace").strip()
                if (graphs / "inflight").exists() else "")
    judged = [f for f in failures if f.phase == "accuracy"]
    if accuracy and judged:  # the per-graph check found the graph wrong on the values the program passed
        failure = next((f for f in judged if f.graph == prefer), judged[-1])
        graph_id, description = _blame_aot(entries, failure.graph), failure.description
        tolerance = failure.tolerance or tolerance
    elif accuracy:
        last = list(entries.values())[-1]
        graph_id, description = _blame_aot(entries,
                                           last.id if last.stage is Stage.DYNAMO else last.parent or last.id), None
    else:
        graph_id, description = _choose(entries, failures, inflight, died_of_signal)
        if description and description.startswith(ACCURACY_TYPE):  # found while recording
            accuracy = True
            tolerance = next((f.tolerance for f in failures if f.phase == "accuracy" and f.tolerance), tolerance)
    grads = dynamo and grads and accuracy
    if dynamo:
        graph_id = _dynamo_parent(entries, graph_id, grads)
    recorded = _load(graphs, entries, failures, graph_id, description, accuracy, tolerance, out_dir)
    return replace(recorded, context=replace(recorded.context, grads=True)) if grads else recorded


def _dynamo_parent(entries: Entries, graph_id: str, grads: bool = False) -> str:
    """A backward graph's Dynamo graph shows its failure only judged with its backward (`grads`)."""
    entry = _entry(entries, graph_id)
    if entry.stage is not Stage.AOT or entry.parent is None or (entry.aot_kind == "backward" and not grads):
        raise NothingToMinify(f"graph {graph_id} has no Dynamo graph to fall back to")
    return entry.parent


def load_compile(run_dir: Path, compile_id: str, *, tolerance: float = DEFAULT_TOLERANCE,
                 out_dir: Path | None = None) -> RecordedFailure:
    """The graph to minify for Dynamo compile `compile_id` against the accuracy check (see the contract)."""
    graphs, entries, failures = _read_run(run_dir)
    dynamo = next((e for e in entries.values() if e.stage is Stage.DYNAMO and e.compile_id == compile_id), None)
    if dynamo is None:
        raise NothingToMinify(f"no recorded graph for compile id {compile_id}")
    return _load(graphs, entries, failures, _blame_aot(entries, dynamo.id), None, True, tolerance, out_dir)


def _read_run(run_dir: Path) -> tuple[Path, Entries, list[GraphFailure]]:
    """(the graphs directory, its index entries by id in compile order, its recorded failures)."""
    graphs = Path(run_dir) / "graphs"
    index = read_index(graphs)
    if not index:
        raise NothingToMinify(f"no recorded graphs under {graphs}")
    return graphs, {e.id: e for e in index}, read_failures(graphs)


def _load(graphs: Path, entries: Entries, failures: list[GraphFailure], graph_id: str,
          description: str | None, accuracy: bool, tolerance: float, out_dir: Path | None) -> RecordedFailure:
    """`graph_id`'s graph as a case, its values (with `out_dir`) saved beside the repro, and its context."""
    entry = _with_parent_zeros(entries, _entry(entries, graph_id))
    values = _recorded_values(graphs, entries, failures, entry) if out_dir is not None else {}
    case = case_from_entry(graphs, entry, values, out_dir, node_values=accuracy)
    return RecordedFailure(graph_id, case, context_from_entry(entry, accuracy, tolerance), _expected(description),
                           recorded_names((graphs / f"{entry.id}.py").read_text(), case.call_nodes))


# Exceptions that only wrap the real failure, whose message names no cause; Inductor raises them
# when its parallel compile workers fail (a recording run has them, the isolated workers do not).
_WRAPPERS = ("SubprocException",)


def _expected(description: str | None) -> FailureSignature | None:
    """The recorded signature; None (the worker's first run decides) when it is only a wrapper."""
    if not description or description.startswith(_WRAPPERS):
        return None
    return from_description(description)


def _recorded_values(graphs: Path, entries: Entries, failures: list[GraphFailure],
                     entry: GraphEntry) -> dict[int, torch.Tensor]:
    """The real input values the recorder kept for `entry`'s graph, by input index (see the contract)."""
    own = _values_file(graphs, entry, failures)
    if own:
        return load_values(graphs / own)
    parent = entries.get(entry.parent or "")
    name = parent and entry.aot_kind != "backward" and _values_file(graphs, parent, failures)
    if not parent or not name:
        return {}
    values = load_values(graphs / name)
    return {at: values[i] for at, i in _aot_positions(parent.inputs, entry.inputs).items() if i in values}


def _with_parent_zeros(entries: Entries, entry: GraphEntry) -> GraphEntry:
    """An after-AOT graph's inputs were fake when recorded, which hides a ZeroTensor; the Dynamo parent's
    real inputs tell it, at the positions AOTAutograd gave them (`_aot_positions`)."""
    parent = entries.get(entry.parent or "")
    if parent is None or entry.aot_kind == "backward":
        return entry
    specs = list(entry.inputs)
    for at, i in _aot_positions(parent.inputs, entry.inputs).items():
        if getattr(parent.inputs[i], "zero", False):
            specs[at] = msgspec.structs.replace(specs[at], zero=True)
    return msgspec.structs.replace(entry, inputs=tuple(specs))


def _values_file(graphs: Path, entry: GraphEntry, failures: list[GraphFailure]) -> str | None:
    """The graph's saved values: those kept when it failed (all its inputs), else before its first call (all
    of them: a process killed in the graph leaves no failure record), else when it was recorded (indices);
    of these, the first whose file is there."""
    kept = [f.values for f in failures if f.graph == entry.id and f.values]
    names = (*kept, values_files(entry.id)[1], entry.values)
    return next((name for name in names if name and (graphs / name).is_file()), None)


def _aot_positions(dynamo_inputs: tuple[InputSpec, ...], aot_inputs: tuple[InputSpec, ...]) -> dict[int, int]:
    """AOT input position -> Dynamo input index. AOTAutograd puts the Dynamo graph module's own
    parameters first, then the Dynamo inputs in order; {} unless every tensor's shape and dtype agree."""
    offset = len(aot_inputs) - len(dynamo_inputs)
    if offset < 0:
        return {}
    pairs = {offset + i: i for i, spec in enumerate(dynamo_inputs) if isinstance(spec, TensorSpec)}
    agree = all(_shape_and_dtype(aot_inputs[at]) == _shape_and_dtype(dynamo_inputs[i]) for at, i in pairs.items())
    return pairs if agree else {}


def _shape_and_dtype(spec: InputSpec) -> tuple[Any, ...]:
    return (spec.shape, spec.dtype) if isinstance(spec, TensorSpec) else (None, None)


def case_from_entry(graphs: Path, entry: GraphEntry, values: dict[int, torch.Tensor] | None = None,
                    out_dir: Path | None = None, *, node_values: bool = False) -> FxCase:
    """The recorded graph as a case; `values` by input index are saved in `out_dir`, beside the repro, and
    with `node_values` (a wrong result: the eager run it is judged against ran) the values its nodes take."""
    gm = load_graph_module(graphs, entry)
    specs = list(entry.inputs)
    if values and out_dir is not None:
        specs = save_repro_inputs([values.get(i) for i in range(len(specs))], specs, out_dir)
    base = make_base(gm, specs, origins_by_node(gm, entry.origins))
    if base is None:
        raise NothingToMinify(f"graph {entry.id} does not run on inputs with its recorded metadata")
    if node_values and out_dir is not None:
        base = with_node_values(base, out_dir)
    return initial_case(base)


def origins_by_node(gm: torch.fx.GraphModule, origins: tuple[NodeOrigin, ...]) -> dict[str, NodeOrigin]:
    """The recorded provenance of each call node of the loaded graph (`_in_order`)."""
    return _in_order([(o.op, o) for o in origins], [n for n in gm.graph.nodes if n.op in CALL_OPS])


def recorded_names(code: str, nodes: Sequence[torch.fx.Node]) -> dict[str, str]:
    """Each call node's name in the recorded `code` (the compiler's own, which a kernel's origins use) -> its
    name among the loaded graph's `nodes` (`_in_order`): assignments of `torch.ops` calls and of items."""
    forward = next(n for n in ast.walk(ast.parse(code)) if isinstance(n, ast.FunctionDef) and n.name == "forward")
    calls: list[tuple[str, str]] = []
    for statement in forward.body:
        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                and isinstance(name := statement.targets[0], ast.Name)):
            continue
        value = statement.value
        if isinstance(value, ast.Subscript):
            calls.append((_GETITEM, name.id))
        elif isinstance(value, ast.Call) and (called := ast.unparse(value.func)).startswith("torch.ops."):
            calls.append((called.removeprefix("torch.ops."), name.id))
    return {recorded: node for node, recorded in _in_order(calls, nodes).items()}


_GETITEM = qualified_name(operator.getitem)


def _in_order(recorded: list[tuple[str, _T]], nodes: Sequence[torch.fx.Node]) -> dict[str, _T]:
    """The loaded graph is rebuilt by tracing the recorded code, which may name nodes otherwise, but it runs
    the code's calls in order: the k-th call of an op is the recorded graph's k-th call of that op. Each
    node's name -> what was recorded for it."""
    by_op: dict[str, list[_T]] = {}
    for op, what in recorded:
        by_op.setdefault(op, []).append(what)
    seen: dict[str, int] = {}
    found = {}
    for node in nodes:
        op = op_name(node)
        k = seen[op] = seen.get(op, -1) + 1
        if k < len(by_op.get(op, ())):
            found[node.name] = by_op[op][k]
    return found


def context_from_entry(entry: GraphEntry, accuracy: bool, tolerance: float) -> ReproContext:
    kind = f"{entry.stage.value} {entry.aot_kind}" if entry.aot_kind == "backward" else entry.stage.value
    header = (
        f"Recorded graph {entry.id} ({kind}, compile id {entry.compile_id}); torch {torch.__version__}.",
    )
    return ReproContext(
        stage=entry.stage, backend=entry.backend or BackendSpec(BackendKind.NAMED, "inductor"),
        config_lines=entry.config, accuracy=accuracy, tolerance=tolerance, header=header,
        backward=entry.aot_kind == "backward", grad_enabled=entry.grad_enabled,
    )

"""FX graphs as reduction candidates: a shared `FxBase` plus which nodes are cut and returned.

Contract:
- `FxBase` is a graph whose inputs are all placeholders (get_attr constants are lifted to inputs)
  with `InputSpec` metadata for every node that yields a tensor or a scalar, found by fake-tensor
  propagation: no real compute, devices and dtypes preserved.
- `FxCase(base, cuts, outputs)` is the graph that returns `outputs`, where each node in `cuts` is
  replaced by a new input with the same metadata, and everything not needed is dropped (unused
  inputs too), except the calls made for their effect (`effect_calls`), which every case keeps.
  `build_case` derives the graph, its code and its input specs once; the canonical
  key is `(code, inputs)`, so two ways of reaching the same graph share one cache entry.
- `FxBase.origins` maps call nodes (by name, which `build_case` and `rebase` keep) to where they came
  from in the user's program, so the minimal case still names its user-level calls (`FxCase.origins`).
- `rebase(case, specs)` re-propagates metadata for new input specs (shape or dtype changes) and
  returns None when the graph is invalid for them, so invalid shapes never cost a query.
- Dims whose size equals a symbolic input dim stay symbolic in new inputs, and `rebase` refuses
  to make a symbolic size 0 or 1: those are specialized, so the compile would see a constant
  instead of a SymInt and the repro would lose what made it dynamic (pytorch#114296).
- A higher-order op (torch.cond, autograd.Function, checkpoint) is one node: its branch graph
  modules stay get_attr nodes (`FxBase.modules`), never inputs, and travel with every case that
  keeps the op; such a case's `code` is the class body (an `__init__` setting the branches, then
  `forward`) and its `prelude` defines the branches' classes (`reduce.repro`).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import torch
import torch.fx

from pt2doctor.capture.torch_compat import (
    fake_tensor_mode,
    is_op_overload,
    is_operator,
    mutates_an_argument,
    qualified_name,
)
from pt2doctor.model.minify import InputSpec, NodeOrigin, ScalarSpec, TensorSpec
from pt2doctor.reduce.repro import module_body, submodule_class

CALL_OPS = ("call_function", "call_method", "call_module")
_DTYPE_COST = {"float32": 0, "float64": 1, "float16": 2, "bfloat16": 3}


@dataclass(frozen=True, eq=False)
class FxBase:
    graph: torch.fx.Graph
    specs: dict[str, InputSpec]  # node name -> metadata, for every tensor/scalar-valued node
    order: dict[str, int]
    symbolic_sizes: frozenset[int] = frozenset()
    modules: dict[str, torch.fx.GraphModule] = field(default_factory=dict)  # get_attr name -> branch graph
    origins: dict[str, NodeOrigin] = field(default_factory=dict)  # call node name -> where it came from


@dataclass(frozen=True, eq=False)
class FxCase:
    base: FxBase
    cuts: frozenset[str]
    outputs: tuple[str, ...]
    graph: torch.fx.Graph = field(repr=False)
    code: str = field(repr=False)
    prelude: tuple[str, ...] = ()
    inputs: tuple[InputSpec, ...] = ()

    @property
    def call_nodes(self) -> list[torch.fx.Node]:
        return [n for n in self.graph.nodes if n.op in CALL_OPS]

    @property
    def node_count(self) -> int:
        return len(self.call_nodes)

    @property
    def ops(self) -> tuple[str, ...]:
        return tuple(op_name(n) for n in self.call_nodes)

    @property
    def origins(self) -> tuple[NodeOrigin, ...]:
        """Where its call nodes came from in the user's program, for those the recording knew."""
        return tuple(self.base.origins[n.name] for n in self.call_nodes if n.name in self.base.origins)


def case_key(case: FxCase) -> tuple[str, tuple[InputSpec, ...]]:
    return case.code, case.inputs


def case_sort_key(case: FxCase) -> tuple[int, ...]:
    tensors = [s for s in case.inputs if isinstance(s, TensorSpec)]
    numel = sum(_numel(s.shape) for s in tensors)
    dtype_cost = sum(_DTYPE_COST.get(s.dtype, 1) for s in tensors)
    return (case.node_count, len(case.outputs), len(case.inputs), numel, dtype_cost, len(case.code))


def op_name(node: torch.fx.Node) -> str:
    return qualified_name(node.target)


def _numel(shape: Sequence[int]) -> int:
    out = 1
    for size in shape:
        out *= size
    return out


# --- building bases ---------------------------------------------------------------------------

def make_base(gm: torch.fx.GraphModule, inputs: Sequence[InputSpec],
              origins: dict[str, NodeOrigin] | None = None) -> FxBase | None:
    """A base from a graph module and its input specs (and its call nodes' provenance, by node name);
    None when fake propagation fails."""
    graph, modules = _lift_get_attrs(gm)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    specs: dict[str, InputSpec] = dict(zip((p.name for p in placeholders), inputs))
    for p in placeholders[len(inputs):]:
        specs[p.name] = spec_of(p.meta["lifted_value"]) or ScalarSpec(None)
    inputs = [specs[p.name] for p in placeholders]
    symbolic = frozenset(s.shape[d] for s in inputs if isinstance(s, TensorSpec) for d in s.dynamic)
    symbolic |= frozenset(int(s.value) for s in inputs
                          if isinstance(s, ScalarSpec) and s.dynamic and isinstance(s.value, int))
    values = propagate(graph, inputs, modules)
    if values is None:
        return None
    for node in graph.nodes:
        if node.op in CALL_OPS and node.name in values:
            spec = spec_of(values[node.name], symbolic)
            if spec is not None:
                specs[node.name] = spec
    order = {n.name: i for i, n in enumerate(graph.nodes)}
    return FxBase(graph, specs, order, symbolic - {0, 1}, modules, dict(origins or {}))


def _lift_get_attrs(gm: torch.fx.GraphModule) -> tuple[torch.fx.Graph, dict[str, torch.fx.GraphModule]]:
    """Copy the graph, turning get_attr constants into placeholders (their values become inputs);
    get_attrs of graph modules (a higher-order op's branches) stay, their modules returned by name."""
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    attrs = [n for n in gm.graph.nodes if n.op == "get_attr"]
    modules = {str(n.target): getattr(gm, str(n.target)) for n in attrs
               if isinstance(getattr(gm, str(n.target)), torch.fx.GraphModule)}
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            env[node] = graph.node_copy(node, env.__getitem__)
    for node in attrs:
        if str(node.target) not in modules:
            env[node] = graph.placeholder(node.name)
            env[node].meta["lifted_value"] = getattr(gm, str(node.target))
    for node in gm.graph.nodes:
        if node.op != "placeholder" and node not in env:
            env[node] = graph.node_copy(node, env.__getitem__)
    return graph, modules


def module_root(modules: dict[str, torch.fx.GraphModule]) -> torch.nn.Module:
    """A root for a graph of the base: its branch graph modules as attributes."""
    root = torch.nn.Module()
    for name, module in modules.items():
        setattr(root, name, module)
    return root


def propagate(graph: torch.fx.Graph, inputs: Sequence[InputSpec],
              modules: dict[str, torch.fx.GraphModule] | None = None) -> dict[str, object] | None:
    """Fake-run the graph on inputs with these specs; node name -> fake value, or None if invalid."""
    mode = fake_tensor_mode()
    gm = torch.fx.GraphModule(module_root(modules or {}), graph)
    values: dict[str, object] = {}
    try:
        with mode:
            args = [_fake_input(spec) for spec in inputs]
            interpreter = _Recorder(gm, values)
            interpreter.run(*args)
    except Exception:
        return None
    return values


class _Recorder(torch.fx.Interpreter):
    def __init__(self, gm: torch.fx.GraphModule, values: dict[str, object]) -> None:
        super().__init__(gm)
        self.values = values

    def run_node(self, n: torch.fx.Node) -> object:
        result = super().run_node(n)
        self.values[n.name] = result
        return result


def _fake_input(spec: InputSpec) -> object:
    if isinstance(spec, ScalarSpec):
        return spec.value
    return torch.empty_strided(spec.shape, spec.stride, dtype=getattr(torch, spec.dtype), device=spec.device)


def spec_of(value: object, symbolic: Iterable[int] = ()) -> InputSpec | None:
    """Metadata of a (fake or real) value; None for values a graph input cannot be."""
    if isinstance(value, torch.Tensor):
        shape = tuple(int(s) for s in value.shape)
        symbolic = set(symbolic) - {0, 1}
        return TensorSpec(
            shape, tuple(int(s) for s in value.stride()), str(value.dtype).removeprefix("torch."),
            str(value.device), bool(value.requires_grad),
            tuple(d for d, s in enumerate(value.shape) if isinstance(s, torch.SymInt) or int(s) in symbolic),
        )
    if isinstance(value, torch.SymInt):
        return ScalarSpec(int(value), dynamic=True)
    if isinstance(value, (int, float, bool)) or value is None:
        return ScalarSpec(value)
    return None


# --- deriving cases ---------------------------------------------------------------------------

def initial_case(base: FxBase) -> FxCase:
    """The whole graph: what it returns, and what it writes in place that nothing reads (`t0.add_(1)`,
    `aten.copy_` into an input), which is kept as one of the case's `outputs` but not returned (a
    returned input is compiled otherwise), so a reduction may still find the failure does not need it."""
    output = next(n for n in base.graph.nodes if n.op == "output")
    names: list[str] = []
    torch.fx.node.map_arg(output.args, lambda n: names.append(n.name))
    names += [n.name for n in base.graph.nodes if not n.users and _writes_in_place(n)]
    return build_case(base, frozenset(), tuple(dict.fromkeys(n for n in names if n in base.specs)))


def _writes_in_place(node: torch.fx.Node) -> bool:
    """`x.add_(y)`, `torch.relu_(x)`, `aten.add_.Tensor`: a call that writes into its first argument."""
    if node.op == "call_method":
        return str(node.target).endswith("_") and not str(node.target).endswith("__")
    if node.op != "call_function":
        return False
    if is_op_overload(node.target):
        return mutates_an_argument(node.target)
    name = getattr(node.target, "__name__", "")
    return name.endswith("_") and not name.endswith("__") and not is_operator(node.target)


def build_case(base: FxBase, cuts: frozenset[str], outputs: Sequence[str]) -> FxCase:
    """The graph returning `outputs`, with `cuts` replaced by inputs; only what is needed is kept."""
    nodes = {n.name: n for n in base.graph.nodes}
    needed = _needed(nodes, cuts, (*outputs, *effect_calls(base.graph)))
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    inputs: list[InputSpec] = []
    for node in base.graph.nodes:
        if node.name not in needed:
            continue
        if node.op == "placeholder" or node.name in cuts:
            env[node] = graph.placeholder(node.name)
            inputs.append(base.specs[node.name])
        else:
            env[node] = graph.node_copy(node, env.__getitem__)
    ordered = sorted(outputs, key=base.order.__getitem__)
    graph.output(tuple(env[nodes[name]] for name in ordered if nodes[name].users or not _writes_in_place(nodes[name])))
    python = graph.python_code("self")
    used = {str(n.target): base.modules[str(n.target)] for n in graph.nodes
            if n.op == "get_attr" and str(n.target) in base.modules}
    if not used:
        return FxCase(base, cuts & needed, tuple(ordered), graph, python.src, render_prelude(python.globals),
                      tuple(inputs))
    classes, globals_ = _submodule_classes(used)
    code = module_body(python.src, used)
    prelude = render_prelude({**globals_, **python.globals}) + classes
    return FxCase(base, cuts & needed, tuple(ordered), graph, code, prelude, tuple(inputs))


def _submodule_classes(modules: dict[str, torch.fx.GraphModule],
                       prefix: str = "") -> tuple[tuple[str, ...], dict[str, object]]:
    """The class definitions of `modules` and of the graph modules nested in them (innermost
    first, so each is defined before its parent's), and the globals their code refers to."""
    classes: list[str] = []
    globals_: dict[str, object] = {}
    for name, module in modules.items():
        children = {str(n.target): getattr(module, str(n.target)) for n in module.graph.nodes if n.op == "get_attr"}
        children = {k: v for k, v in children.items() if isinstance(v, torch.fx.GraphModule)}
        nested, nested_globals = _submodule_classes(children, f"{prefix}{name}.")
        python = module.graph.python_code("self")
        classes += [*nested, submodule_class(f"{prefix}{name}", module_body(python.src, children, f"{prefix}{name}."))]
        globals_.update(nested_globals)
        globals_.update(python.globals)
    return tuple(classes), globals_


def effect_calls(graph: torch.fx.Graph) -> tuple[str, ...]:
    """The calls of plain functions (not ops, not `operator`'s) whose value nothing uses: Dynamo drops an
    unused call without effects, so one left in its graph is there to change state (functorch's
    `_jvp_increment_nesting` and `_enter_dual_level` around a `torch.func.jvp`, grad mode), and a case
    without it computes something else (`_make_dual` outside a dual level raises)."""
    return tuple(n.name for n in graph.nodes if n.op == "call_function" and not n.users and (
        n.target is operator.setitem  # `t[i] = v`: a write into `t`, and no value to return instead
        or not is_operator(n.target) and getattr(n.target, "__module__", None) != "_operator"))


def _needed(nodes: dict[str, torch.fx.Node], cuts: frozenset[str], outputs: Sequence[str]) -> set[str]:
    needed: set[str] = set()
    stack = list(outputs)
    while stack:
        name = stack.pop()
        if name in needed:
            continue
        needed.add(name)
        node = nodes[name]
        if name not in cuts:
            stack.extend(n.name for n in node.all_input_nodes)
    return needed


_PRELUDE_FIXED = {
    "inf": 'inf = float("inf")',
    "nan": 'nan = float("nan")',
    "NoneType": "NoneType = type(None)",
    "device": "device = torch.device",
    "fx_pytree": "import torch.fx._pytree as fx_pytree",
    "pytree": "import torch.utils._pytree as pytree",
}


def render_prelude(globals_: dict[str, object]) -> tuple[str, ...]:
    """Lines defining the names FX code refers to, beyond `torch` itself."""
    lines = []
    for name, obj in sorted(globals_.items()):
        if name in ("torch", "builtins"):
            continue
        if name in _PRELUDE_FIXED:
            lines.append(_PRELUDE_FIXED[name])
        elif getattr(obj, "__name__", None) == name and hasattr(obj, "__spec__"):
            lines.append(f"import {name}")
        else:
            module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", "")
            if not module or "." in qualname or "<" in qualname:
                raise ValueError(f"graph refers to {name}={obj!r}, which a standalone script cannot import")
            lines.append(f"from {module} import {qualname} as {name}")
    return tuple(lines)


def rebase(case: FxCase, inputs: Sequence[InputSpec]) -> FxCase | None:
    """The same graph with new input specs, metadata re-propagated; None when invalid for them."""
    if any(_specializes(spec) for spec in inputs):
        return None
    base = make_base(torch.fx.GraphModule(module_root(case.base.modules), case.graph), inputs, case.base.origins)
    return None if base is None else initial_case(base)


def _specializes(spec: InputSpec) -> bool:
    """A symbolic size made 0 or 1, which Dynamo and `make_fx` specialize to a constant."""
    if isinstance(spec, ScalarSpec):
        return spec.dynamic and isinstance(spec.value, int) and spec.value < 2
    return any(spec.shape[d] < 2 for d in spec.dynamic)

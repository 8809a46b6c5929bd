"""Repro scripts as data first, then text: `ReproScript` values and the one template that renders them.

Contract: `render(script)` is a pure function of the value and byte-stable (golden-testable). The
text is a standalone program that needs plain torch only (no pt2doctor import):
- `check()` builds `Repro` (the graph as an `nn.Module`), makes inputs (random with the recorded
  metadata, seeded, so every run sees the same values, integers within their recorded range or
  zeros; or, where the values matter, the saved
  ones: `repro_inputs.pt` beside the script, read with `torch.load(weights_only=True)`), runs eager first (a candidate
  whose eager run fails is invalid and raises `InvalidRepro`, which never matches a recorded failure), then
  compiles the way the failing stage did and runs; in accuracy mode eager and its fp64 reference run
  on copies of the inputs from one RNG state, and compiled is judged against them by pt2doctor's
  accuracy rule, whose source the script embeds verbatim (`torch_compat.accuracy_rule`: the probe
  and the recorder judge with the same text). After AOT
  with symbolic sizes, the graph Inductor gets is traced with a SymInt exactly where the recorded
  run had one (`DYNAMIC_DIMS`; pytorch#114296) and a static size everywhere else.
- `describe_failure(exc)` is the single definition of how a failure is described; the minifier's
  workers call it on candidates and `python repro.py` prints it after `PT2DOCTOR REPRO FAILED: `,
  so a verified repro and the reduction agree on what "the same failure" means.
- Run as a script it exits 1 on an exception, dies of the signal on a crash, and exits 0 when the
  bug is gone.
- A graph that calls higher-order ops defines its branches as classes (in the prelude) and is
  built as a `GraphModule` by tracing (`graph_module`: the ops reject Proxies, so they are recorded
  as nodes while tracing); for the Dynamo stage it is handed to the backend directly, as Dynamo
  handed it over (Dynamo cannot re-trace every higher-order op it emits). So is a graph calling
  torch functions tracing cannot see (`torch_compat.opaque_calls`: functorch's scaffolding around a
  `torch.func.jvp`), recorded as nodes the same way.
- For the Dynamo stage, an int input that was a SymInt when the graph failed is compiled as one
  (`torch.compiler.config.dynamic_sources` naming exactly those arguments), so a graph that became
  dynamic after a recompile fails in the repro as it did.
- A Dynamo graph judged `grads` (a wrong result AOTAutograd's backward graph showed) runs forward and backward,
  compiled and eager, and the gradients are judged with the outputs (`accuracy_rule.with_grads`).
- A backward graph (`backward`: what AOTAutograd hands `bw_compiler`) runs standalone on its own
  inputs (saved activations, tangents); Inductor compiles it with `is_backward=True`, another
  `aot_autograd` backend (its source, or its registered name) with its own `bw_compiler`.
- An exported program's graph (`Stage.AOTI`) is exported again (non-strict) and compiled, loaded and
  called as a script deploys it: `aoti_compile_and_package` with the recorded `inductor_configs`,
  `aoti_load_package`, the package called on the inputs.
- A graph calling a prim that Inductor defines (its random prims: dropout after AOT; its max-pool
  backward's offsets) imports `torch._inductor.inductor_prims`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pt2doctor.capture.torch_compat import (
    accuracy_rule_source,
    graph_module_source,
    inductor_prim_calls,
    opaque_calls,
    torch_ops_called,
)
from pt2doctor.model.minify import DEFAULT_TOLERANCE, BackendKind, BackendSpec, InputSpec, ScalarSpec, Stage, TensorSpec
from pt2doctor.reduce import repro_templates as t


@dataclass(frozen=True, slots=True)
class ReproScript:
    stage: Stage
    forward_code: str  # "def forward(self, ...):" and its body, unindented
    inputs: tuple[InputSpec, ...]
    backend: BackendSpec = BackendSpec(BackendKind.NAMED, "inductor")
    prelude: tuple[str, ...] = ()  # names the graph code refers to, e.g. "device = torch.device"
    config_lines: tuple[str, ...] = ()
    accuracy: bool = False
    tolerance: float = DEFAULT_TOLERANCE
    header: tuple[str, ...] = ()  # versions, the failure it reproduces
    backward: bool = False  # an after-AOT backward graph: compiled as the backend's bw_compiler would
    inductor_configs: str = "None"  # Stage.AOTI: the `inductor_configs` argument of aoti_compile_and_package, as source
    grads: bool = False  # accuracy of a Dynamo graph judged with its backward too (`accuracy_rule.with_grads`)
    grad_enabled: bool = True  # the grad mode the graph was compiled under (`without_grad`)

    @property
    def without_grad(self) -> bool:
        """A Dynamo graph the program compiled under `torch.no_grad()` (or inference mode): both sides run so, its
        inputs made as they were first (what required grad still does). AOTAutograd then traces an inference
        graph, no joint forward and backward, as in the program: the graph the backend was handed, at a fraction
        of the cost (ResNet's eval graph with `aot_eager`: 0.37 s against 1.0 s)."""
        return not self.grad_enabled and self.stage is Stage.DYNAMO


def render(script: ReproScript) -> str:
    """The repro program's text; a pure, byte-stable function of `script`, with only the pieces its kind
    of failure needs (`repro_templates`)."""
    code = "\n".join((*script.prelude, script.forward_code))
    traced_ops = ops_to_record(script.forward_code, script.prelude)
    # higher-order ops and the functions tracing cannot see (functorch's scaffolding): Dynamo wrote them,
    # and cannot compile every one of them again from code
    handed_over = tuple(op for op in traced_ops if op.startswith(("higher_order.", "torch.")))
    constants = f"ACCURACY = True\nTOLERANCE = {script.tolerance!r}\n" if script.accuracy else ""
    constants += "GRADS = True  # judged with its backward (`with_grads`)\n" if script.accuracy and script.grads else ""
    check = (t.CHECK_ACCURACY if not script.grads else t.with_grads(t.CHECK_ACCURACY)) if script.accuracy else t.CHECK
    check = t.without_grad(check) if script.without_grad else check
    parts = [
        _docstring(script),
        t.IMPORTS + (t.INDUCTOR_PRIMS if any(call in code for call in inductor_prim_calls()) else ""),
        "\n".join(script.config_lines) + ("\n" if script.config_lines else ""),
        t.ONE_COMPILE_THREAD,
        "\n".join(script.prelude) + ("\n" if script.prelude else ""),
        constants + _render_dynamic_dims(script),
        _render_backend(script) if script.stage is Stage.DYNAMO or _custom_backward(script) else "",
        _render_module(script.forward_code),
        _render_inputs(script),
        t.HELPERS,
        t.SAVED_INPUT if any(isinstance(s, TensorSpec) and s.saved for s in script.inputs) else "",
        f"{t.ACCURACY_ERROR}\n{accuracy_rule_source()}" if script.accuracy else "",
        f"TORCH_OPS = {traced_ops!r}\n\n{graph_module_source()}" if traced_ops else "",
        _render_compile(script, handed_over),
        check.replace("MAKE_MODULE", "graph_module(Repro(), TORCH_OPS)" if traced_ops else "Repro()") + t.MAIN,
    ]
    return "\n".join(p for p in parts if p)


def ops_to_record(forward_code: str, prelude: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The ops `forward_code` calls that tracing must record itself: higher-order ops, and ops none of whose
    operands derives from an input, a module attribute or another recorded op (the roots of input-independent
    computations; what they feed is traced anyway)."""
    forward = next(node for node in ast.walk(ast.parse(forward_code)) if isinstance(node, ast.FunctionDef))
    traced = {a.arg for a in forward.args.args} | {a.arg for a in forward.args.kwonlyargs}
    if forward.args.vararg:
        traced.add(forward.args.vararg.arg)
    record: list[str] = []
    for statement in forward.body:
        if not isinstance(statement, ast.Assign):
            continue
        value = ast.unparse(statement.value)
        names = {n.id for n in ast.walk(statement.value) if isinstance(n, ast.Name)}
        ops = torch_ops_called(value)
        higher_order = [op for op in ops if op.startswith("higher_order.")]
        if ops and (higher_order or not names & traced):
            record += higher_order or ops
        if names & traced or ops:
            traced |= {n.id for t in statement.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    code = "\n".join((*prelude, forward_code))
    record += [op for op in torch_ops_called(code) if op.startswith("higher_order.")]  # also in branch classes
    record += opaque_calls(code)  # they would run while tracing (`torch_compat.fx_trace`)
    return tuple(dict.fromkeys(record))


def _render_compile(script: ReproScript, handed_over: tuple[str, ...]) -> str:
    if script.stage is Stage.AOTI:
        return f"\nINDUCTOR_CONFIGS = {script.inductor_configs}\n{t.COMPILE_AOTI}"
    if _custom_backward(script):
        return t.COMPILE_AOT_BACKWARD
    if script.stage is not Stage.DYNAMO:
        aot = t.COMPILE_AOT_DYNAMIC if any(s.dynamic for s in script.inputs) else t.COMPILE_AOT
        zero = any(isinstance(s, TensorSpec) and s.zero for s in script.inputs)
        return aot.replace("BACKWARD_ARG", ", is_backward=True" if script.backward else "").replace(
            "EXAMPLES", t.PLAIN_EXAMPLES if zero else "list(args)")
    if handed_over:
        return t.COMPILE_DIRECT
    sources = _dynamic_sources(script)
    if sources:
        return f"DYNAMIC_SOURCES = {sources!r}\n{t.COMPILE_DYNAMIC_SOURCES}"
    return t.COMPILE_DYNAMO


def _custom_backward(script: ReproScript) -> bool:
    """A backward graph of a backend other than Inductor: compiled by the backend's own `bw_compiler`."""
    return (script.stage is Stage.AOT and script.backward
            and script.backend != BackendSpec(BackendKind.NAMED, "inductor"))


def _dynamic_sources(script: ReproScript) -> str:
    """Dynamo's source names (`L['k']`) of the int inputs that were SymInts, for `dynamic_sources`."""
    forward = next(node for node in ast.walk(ast.parse(script.forward_code))
                   if isinstance(node, ast.FunctionDef) and node.name == "forward")
    names = [arg.arg for arg in forward.args.args[1:]]
    return ",".join(f"L['{name}']" for name, spec in zip(names, script.inputs)
                    if isinstance(spec, ScalarSpec) and spec.dynamic)


def submodule_class(name: str, body: str) -> str:
    """A graph submodule's class (`cond_true_0` -> `CondTrue0`), `body` its methods, unindented."""
    return _render_module(body, class_name(name))


def class_name(name: str) -> str:
    camel = "".join(part[:1].upper() + part[1:] for part in re.split(r"[._]", name) if part)
    return camel if camel != "Repro" else "Repro_"


def module_body(forward_code: str, children: Iterable[str], prefix: str = "") -> str:
    """`forward_code` preceded by an `__init__` that sets `children` (graph submodules, whose classes
    are named after `prefix` + their name), or alone when there are none."""
    children = list(children)
    if not children:
        return forward_code
    init = ["def __init__(self):", "    super().__init__()"]
    init += [f"    self.{child} = {class_name(prefix + child)}()" for child in children]
    return "\n".join(init) + "\n\n" + forward_code.strip() + "\n"


def _render_dynamic_dims(script: ReproScript) -> str:
    """After AOT, per input, which dims were symbolic (a SymInt input: True); the rest stay static."""
    if script.stage is not Stage.AOT or not any(s.dynamic for s in script.inputs):
        return ""
    dims = [s.dynamic if isinstance(s, TensorSpec) else bool(s.dynamic) for s in script.inputs]
    return f"DYNAMIC_DIMS = {dims!r}\n"


NO_GRAD_NOTE = "Run under torch.no_grad(), as the program compiled it."
HOW_TO_RUN = "Run `python repro.py`: it exits non-zero while the bug is present."


def _docstring(script: ReproScript) -> str:
    lines = ["Minimal repro written by pt2doctor; needs plain torch only.", ""]
    lines += list(script.header)
    lines += [f"Stage: {script.stage.value}.", HOW_TO_RUN]
    if script.grads and script.accuracy:
        lines.append("Judged with its backward too: the gradients of the sum of its outputs, compiled against eager.")
    if script.without_grad:
        lines.append(NO_GRAD_NOTE)
    return '"""' + "\n".join(lines) + '\n"""\n'


def _render_backend(script: ReproScript) -> str:
    backend = script.backend
    if backend.kind is BackendKind.NAMED:
        return f"BACKEND = {backend.name!r}\n"
    if backend.kind is BackendKind.SOURCE:
        return f"\n{backend.source.rstrip()}\n\n\nBACKEND = {backend.name}\n"
    return (
        f"\ndef {backend.name}(gm, example_inputs):\n"
        f"    # The user's backend; its source was not available when the run was recorded.\n"
        f"    raise RuntimeError({backend.source!r})\n\n\nBACKEND = {backend.name}\n"
    )


def _render_module(forward_code: str, name: str = "Repro") -> str:
    body = "\n".join(("    " + line) if line.strip() else "" for line in forward_code.strip().splitlines())
    return f"\nclass {name}(torch.nn.Module):\n{body}\n"


def _render_inputs(script: ReproScript) -> str:
    lines = ["", "def make_inputs():", "    torch.manual_seed(0)"]
    groups = storage_groups(script.inputs)
    for group, members in groups.items():
        name, root = _storage_name(group), storage_root(members)
        lines.append(f"    {name} = {_render_storage(members, script.stage)}")
        if root is not None:  # as the program had it: one tensor, and views of it
            lines.append(f"    {name} = {name}.as_strided({root.shape!r}, {root.stride!r}).clone()")
    roots = {id(root) for root in map(storage_root, groups.values()) if root is not None}
    lines.append("    args = [")
    lines += ["        " + _render_input(spec, script.stage, any(spec in members for members in groups.values()),
                                         id(spec) in roots) + ","
              for spec in script.inputs]
    lines.append("    ]")
    if script.stage is Stage.DYNAMO:
        for index, spec in enumerate(script.inputs):
            for dim in spec.dynamic if isinstance(spec, TensorSpec) else ():
                lines.append(f"    torch._dynamo.mark_dynamic(args[{index}], {dim})")
    lines.append("    return args")
    return "\n".join(lines) + "\n"


def storage_groups(inputs: Sequence[InputSpec]) -> dict[int, list[TensorSpec]]:
    """The inputs that are views of one storage, by `TensorSpec.storage`: those of the first one's dtype
    (a reduction may have changed another's, which then stands alone)."""
    groups: dict[int, list[TensorSpec]] = {}
    for spec in inputs:
        if isinstance(spec, TensorSpec) and spec.storage is not None and not spec.zero:
            members = groups.setdefault(spec.storage, [])
            if not members or members[0].dtype == spec.dtype:
                members.append(spec)
    return groups


def storage_extent(spec: TensorSpec) -> int:
    """The elements of its storage a view reaches, from offset 0 (`make_tensor`'s rule)."""
    return spec.offset + (1 + sum((size - 1) * step for size, step in zip(spec.shape, spec.stride))
                          if all(spec.shape) else 0)


def storage_root(members: list[TensorSpec]) -> TensorSpec | None:
    """The member the others are views of: dense over the whole storage they reach, from offset 0."""
    extent = max(storage_extent(m) for m in members)
    return next((m for m in members if len(members) > 1 and m.offset == 0 and storage_extent(m) == extent
                 and _numel(m.shape) == extent), None)


def _numel(shape: tuple[int, ...]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


def _storage_name(group: int) -> str:
    return f"storage{group}" if group >= 0 else f"storage_own{-group}"


def _render_storage(members: list[TensorSpec], stage: Stage) -> str:
    """One flat tensor the group's inputs are views of: its saved values where every member has them (the
    storage as recorded), else random over the extent they reach. It needs grad when a member is a non-leaf
    that needs grad: its views then have autograd history, as the program's did."""
    first = members[0]
    grad = (", requires_grad=True" if stage is Stage.DYNAMO and any(m.requires_grad and not m.leaf for m in members)
            else "")
    if all(m.saved and m.saved == first.saved for m in members):
        return f"saved_input({first.saved!r}, {first.device!r}{grad})"
    bounds = [m.bounds for m in members if m.bounds]
    span = (min(b[0] for b in bounds), max(b[1] for b in bounds)) if bounds else None
    extent = max(storage_extent(m) for m in members)
    return (f"make_tensor(({extent},), (1,), torch.{first.dtype}, {first.device!r}{grad}"
            + (f", bounds={span!r}" if span else "") + ")")


def _render_input(spec: InputSpec, stage: Stage, in_group: bool = False, root: bool = False) -> str:
    if isinstance(spec, ScalarSpec):
        return repr(spec.value)
    grad = spec.requires_grad and stage is Stage.DYNAMO
    if spec.zero:  # no storage to fill: autograd's efficient zeros, as the program passed them
        return f"torch._efficientzerotensor({spec.shape!r}, dtype=torch.{spec.dtype}, device={spec.device!r})"
    if in_group:  # a view of its group's storage, where the program's was
        name = _storage_name(spec.storage)  # type: ignore[arg-type]
        view = name if root else f"{name}.as_strided({spec.shape!r}, {spec.stride!r}, {spec.offset})"
        return view + (".requires_grad_()" if grad and spec.leaf else "")
    if spec.saved:
        made = f"saved_input({spec.saved!r}, {spec.device!r}" + (", requires_grad=True)" if grad else ")")
    else:
        made = (f"make_tensor({spec.shape!r}, {spec.stride!r}, torch.{spec.dtype}, {spec.device!r}"
                + (", requires_grad=True" if grad else "") + (f", bounds={spec.bounds!r}" if spec.bounds else "")
                + (f", offset={spec.offset}" if spec.offset else "") + ")")
    # a non-leaf input (with autograd history) is one a backend may treat differently from a leaf
    return f"{made}.clone()" if grad and not spec.leaf else made

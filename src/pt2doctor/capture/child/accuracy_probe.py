"""The child side of `pt2doctor accuracy`: judge every compiled graph against eager, in the user's run.

Contract: `install(spec)` is called once by `capture/child/__main__.py` with the child spec's
`AccuracyProbeSpec` (`out`: the results file, `tol`) and returns the uninstall function. It wraps
every Dynamo backend call (`torch_compat.patch_backend_call`); on the first call of each compiled
graph, before the user's own call, it judges the graph with pt2doctor's accuracy rule
(`torch_compat.accuracy_rule`, the one the recorder's check and every repro use):
1. the Dynamo graph runs eagerly in fp32, eagerly in fp64 (`fp64_module`: inputs, parameters,
   constants and the graph's own float dtypes cast), and compiled twice, forward and, when grad is
   on and an input requires it, backward (`autograd.grad` of the outputs against a fixed cotangent),
   each on copies of the inputs that keep strides, storage offsets and aliasing (`copy_inputs`),
   under the program's grad mode; the RNG state is restored before each run and before the user's
   call, so the program draws and computes exactly what it would without the probe;
2. compiled is judged against eager by the rule (`same_outputs`: floating outputs by PyTorch's
   fp64-referenced rule, integer and bool ones exactly, a changed dtype or shape a failure). An
   output with no fp64 value (the fp64 run raised, or the output stays float32 in it) is judged by
   allclose alone; the reason is recorded (`GraphAccuracy.fp64_unavailable`);
3. when the graph fails, localizes in ONE instrumented run, no bisection: the graph rewritten so every
   tensor intermediate is an output, compiled once with the same backend, each intermediate judged
   with the same rule; the first failing one in topological order is the first divergent node.
One `GraphAccuracy` per graph is appended to `out` as a JSON line, with the backend's name and the
random ops that actually draw (a dropout with p=0 or training=False does not). A probe error is
recorded on the graph (`verdict="error"`, with the reason: a graph the probe cannot run is reported
so) and never changes the user's program; what the probe's runs
write to stderr (FX prints a failing graph's code there) is swallowed, never shown to the user.
"""

from __future__ import annotations

import copy
import io
import re
from collections.abc import Callable, Sequence
from contextlib import redirect_stderr
from dataclasses import replace
from pathlib import Path
from typing import Any

from pt2doctor.capture import torch_compat
from pt2doctor.capture.child import graph_recorder
from pt2doctor.capture.child.graph_modules import graph_copy
from pt2doctor.model.accuracy import DivergentNode, Errors, GraphAccuracy
from pt2doctor.model.child import AccuracyProbeSpec
from pt2doctor.model.serialize import append_line

TOP_NODES = 5
_REDUCED = ("bfloat16", "float16")
_REL_FLOOR = 1e-6  # relative error against |eager| below this is meaningless (a dropped unit, a zero)


def install(spec: AccuracyProbeSpec) -> Callable[[], None]:
    probe = AccuracyProbe(Path(spec.out), spec.tol)
    return torch_compat.patch_backend_call(probe.on_backend_call)


class AccuracyProbe:
    def __init__(self, out: Path, tol: float) -> None:
        self.out = out
        self.tol = tol

    def on_backend_call(self, original: Callable[..., Any], output_graph: Any, gm: Any, example_inputs: Any) -> Any:
        graph_id = torch_compat.current_compile_id() or "?"
        eager = graph_copy(gm)  # the backend may rewrite gm's graph
        compiled = original(output_graph, gm, example_inputs)
        backend = output_graph.compiler_fn
        name = backend_name(backend)
        state = {"checked": False}

        def run(*args: Any) -> Any:  # Dynamo calls what a backend returns unboxed, `fn(*graphargs)` (2.13)
            if not state["checked"]:
                state["checked"] = True
                record = replace(self.check(graph_id, eager, backend, compiled, list(args)), backend=name)
                self.write(record)
                if record.verdict == "fail":  # a recorded run keeps what was judged wrong (`graph_recorder`)
                    graph_recorder.keep_failing_inputs(graph_id, self.tol, args)
            return compiled(*args)

        return run

    def check(self, graph_id: str, gm: Any, backend: Any, compiled: Any, args: list[Any]) -> GraphAccuracy:
        try:  # FX prints the code of a graph that raises to stderr (`_WrappedCall`, 2.13): not the user's
            with torch_compat.kept_state(), redirect_stderr(io.StringIO()):
                return judge_graph(graph_id, gm, backend, compiled, args, self.tol)
        except Exception as exc:  # the probe must never break the user's program
            return GraphAccuracy(graph_id, "error", error=f"{type(exc).__name__}: {exc}"[:2000])

    def write(self, record: GraphAccuracy) -> None:
        with open(self.out, "a") as handle:
            append_line(handle, record)


def judge_graph(graph_id: str, gm: Any, backend: Any, compiled: Any, args: list[Any], tol: float) -> GraphAccuracy:
    import torch

    want_grad = torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
    rng = torch_compat.rng_state()
    runs: dict[str, Any] = {}
    for name, fn in (("eager", gm), ("fp64", None), ("compiled", compiled), ("again", compiled)):
        torch_compat.set_rng_state(rng)
        runs[name] = fp64_run(gm, args, want_grad) if fn is None else run_once(fn, args, want_grad, False)
    (fp64, unavailable) = runs["fp64"]
    fp64_fwd, fp64_bwd = fp64 if fp64 is not None else (None, None)
    unavailable = unavailable or missing_reference(runs["eager"][0], fp64_fwd)
    forward = compare(runs["eager"][0], runs["compiled"][0], fp64_fwd, tol)
    backward = compare(runs["eager"][1], runs["compiled"][1], fp64_bwd, tol) if runs["eager"][1] else None
    again = _max_abs(runs["compiled"][0] + runs["compiled"][1], runs["again"][0] + runs["again"][1])
    failed = forward.verdict == "fail" or (backward is not None and backward.verdict == "fail")
    nodes: list[DivergentNode] = []
    count, error = 0, None
    if failed:
        torch_compat.set_rng_state(rng)
        try:
            nodes, count = localize(gm, backend, args, tol)
        except Exception as exc:  # keep the verdict; say why there is no first divergent node
            error = f"localizing failed: {type(exc).__name__}: {exc}"[:2000]
    worst = max((e for e in (forward, backward) if e is not None), key=lambda e: e.max_abs_err or 0.0)
    return GraphAccuracy(
        graph=graph_id, verdict="fail" if failed else "pass", max_abs_err=worst.max_abs_err,
        rmse_ratio=_max_opt(forward.rmse_ratio, backward.rmse_ratio if backward else None),
        forward=forward, backward=backward, first_divergent=nodes[0] if nodes else None,
        top_divergent=tuple(sorted(nodes, key=lambda n: -(n.max_abs_err or 0.0))[:TOP_NODES]),
        nodes_compared=count, random_ops=torch_compat.random_ops(gm), reduced_precision=reduced_precision(gm, args),
        deterministic=again == 0.0, run_to_run_max_abs=again, error=error, fp64_unavailable=unavailable,
    )


def run_once(fn: Callable[..., Any], args: Sequence[Any], want_grad: bool, fp64: bool) -> tuple[list[Any], list[Any]]:
    """Tensor outputs (detached) and, with `want_grad`, the gradients of the inputs that require it.
    It runs on copies of `args` (`copy_inputs`), under the program's grad mode: a graph may compute
    gradients itself (`torch.func.grad`), and Dynamo traced it under that mode."""
    import torch

    inputs = torch_compat.copy_inputs(args, fp64=fp64)
    with torch_compat.kept_state():  # a run that raises must not leave a functorch level behind
        outputs = [o for o in _flatten(fn(*inputs)) if isinstance(o, torch.Tensor)]
    leaves = [a for a in inputs if isinstance(a, torch.Tensor) and a.requires_grad]
    diff = [o for o in outputs if o.requires_grad and o.is_floating_point()]
    grads: list[Any] = []
    if want_grad and leaves and diff:
        found = torch.autograd.grad(diff, leaves, [_cotangent(o) for o in diff], allow_unused=True)
        grads = [g.detach() if g is not None else torch.zeros_like(x) for g, x in zip(found, leaves)]
    return [o.detach() for o in outputs], grads


def fp64_run(gm: Any, args: Sequence[Any], want_grad: bool) -> tuple[Any, str | None]:
    """`(run, None)`: the fp64 reference run; or `(None, why)` when the graph cannot run in fp64 (an op
    with no fp64 kernel, a dtype the cast cannot reach): then, as in `same_two_models` ("Could not
    generate fp64 outputs"), compiled is judged against eager alone."""
    try:
        return run_once(torch_compat.fp64_module(gm), args, want_grad, True), None
    except Exception as exc:
        return None, _one_line(exc)


def compare(eager: Sequence[Any], compiled: Sequence[Any], fp64: Sequence[Any] | None, tol: float) -> Errors:
    """The rule's verdict (`torch_compat.same_outputs`: floating outputs against their fp64 values,
    the others exactly), and the errors behind it."""
    reference = list(fp64) if fp64 is not None else [None] * len(eager)
    pairs = [(e, c, r if is_fp64(r) else None) for e, c, r in zip(eager, compiled, reference) if _is_tensor(e)]
    ok = torch_compat.same_outputs(list(eager), list(compiled), reference, tol)
    stats = [_pair_errors(e, c, r) for e, c, r in pairs]
    return Errors(
        "pass" if ok else "fail",
        max_abs_err=_max_opt(*(s[0] for s in stats)), max_rel_err=_max_opt(*(s[1] for s in stats)),
        rmse_ratio=_max_opt(*(s[2] for s in stats)), rmse_compiled=_max_opt(*(s[3] for s in stats)),
        rmse_eager=_max_opt(*(s[4] for s in stats)),
    )


def _pair_errors(eager: Any, compiled: Any, fp64: Any) -> tuple[float | None, ...]:
    if not _is_tensor(compiled) or eager.shape != compiled.shape:
        return (None,) * 5
    e, c = eager.double(), compiled.double()
    if e.shape != c.shape:
        return (None,) * 5
    diff = (c - e).abs()
    rel = diff / e.abs().clamp_min(_REL_FLOOR)
    if fp64 is None:  # no fp64 reference: errors against eager only
        return _finite(_nanmax(diff)), _finite(_nanmax(rel)), None, None, None
    r = fp64.double()
    rmse_c, rmse_e = _rmse(r, c), _rmse(r, e)
    # eager equals fp64: the ratio is undefined (docs/reference/session-json.md)
    ratio = rmse_c / rmse_e if rmse_e else None
    return _finite(_nanmax(diff)), _finite(_nanmax(rel)), _finite(ratio), _finite(rmse_c), _finite(rmse_e)


def localize(gm: Any, backend: Any, args: list[Any], tol: float) -> tuple[list[DivergentNode], int]:
    """Every failing intermediate, in topological order, from one instrumented compile and run."""
    import torch

    probe, nodes = instrumented(gm)
    if not nodes:
        return [], 0
    with torch.no_grad():
        inputs = [a.detach() if isinstance(a, torch.Tensor) else a for a in torch_compat.copy_inputs(args)]
        compiled = backend(graph_copy(probe), inputs)  # the backend may rewrite its graph
        rng = torch_compat.rng_state()
        values = {}
        for name, fn in (("eager", probe), ("fp64", None), ("compiled", compiled)):
            torch_compat.set_rng_state(rng)
            run = fp64_run(probe, args, False)[0] if fn is None else run_once(fn, args, False, False)
            values[name] = run[0] if run is not None else [None] * len(nodes)
    failing = []
    for index, (node, e, c, r) in enumerate(zip(nodes, values["eager"], values["compiled"], values["fp64"])):
        errors = compare([e], [c], [r], tol)
        if errors.verdict == "fail":
            failing.append(describe_node(node, index, errors))
    return failing, len(nodes)


def instrumented(gm: Any) -> tuple[Any, list[Any]]:
    """A copy of `gm` whose outputs are all its tensor intermediates, and those nodes."""
    import torch.fx

    graph = copy.deepcopy(gm.graph)
    nodes = [n for n in graph.nodes if n.op.startswith("call_") and _is_tensor(torch_compat.node_example_value(n))]
    output = next(n for n in graph.nodes if n.op == "output")
    output.args = (tuple(nodes),)
    graph.eliminate_dead_code()
    return torch.fx.GraphModule(gm, graph), nodes


def describe_node(node: Any, index: int, errors: Errors) -> DivergentNode:
    value = torch_compat.node_example_value(node)
    file, line, code = user_frame(node.meta.get("stack_trace") or "")
    return DivergentNode(
        node=node.name, op=torch_compat.op_name(node), file=file, line=line, code=code,
        shape=tuple(torch_compat.symint_hint(s) for s in value.shape), dtype=str(value.dtype).removeprefix("torch."),
        max_abs_err=errors.max_abs_err, rmse_ratio=errors.rmse_ratio, index=index,
    )


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in [^\n]*\n\s*([^\n]*)')


def user_frame(stack_trace: str) -> tuple[str | None, int | None, str | None]:
    """The innermost frame of an FX node's stack trace outside torch itself (an `nn.ReLU` call is
    recorded inside torch/nn/modules; the user's line is the one that called it)."""
    frames = _FRAME.findall(stack_trace)
    user = [f for f in frames if "/torch/" not in f[0].replace("\\", "/")] or frames
    if not user:
        return None, None, None
    file, line, code = user[-1]
    return file, int(line), code.strip() or None


def backend_name(compiler_fn: Any) -> str | None:
    """The backend's name as torch.compile was given it (`inductor`, `aot_eager`, a callable's name)."""
    chain = torch_compat.backend_chain(compiler_fn)
    return getattr(chain[0], "__name__", None) or type(chain[-1]).__name__ if chain else None


def reduced_precision(gm: Any, args: Sequence[Any]) -> tuple[str, ...]:
    import torch

    values = list(args) + [torch_compat.node_example_value(n) for n in gm.graph.nodes]
    found = {str(v.dtype).removeprefix("torch.") for v in values if isinstance(v, torch.Tensor)}
    notes = [d for d in _REDUCED if d in found]
    if torch.get_float32_matmul_precision() != "highest" or torch.backends.cuda.matmul.allow_tf32:
        notes.append("tf32")
    return tuple(notes)


def _cotangent(out: Any) -> Any:
    """A fixed, input-independent cotangent (not ones: a softmax's gradient against ones is zero)."""
    import torch

    generator = torch.Generator().manual_seed(0)
    return torch.randn(out.shape, generator=generator, dtype=torch.float64).to(out.dtype).to(out.device)


def missing_reference(eager: Sequence[Any], fp64: Sequence[Any] | None) -> str | None:
    """Why some floating output has no fp64 value although the fp64 run ran, or None."""
    for index, (e, r) in enumerate(zip(eager, fp64 or ())):
        if is_float(e) and not is_fp64(r):
            return f"output {index} stays {str(getattr(r, 'dtype', None)).removeprefix('torch.')} in the fp64 run"
    return None


def is_float(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor) and value.is_floating_point()


def is_fp64(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor) and value.dtype == torch.float64


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def _flatten(value: Any) -> list[Any]:
    return torch_compat.tree_leaves(value)


def _one_line(exc: BaseException) -> str:
    first = next((line for line in str(exc).splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {first.strip()}"[:300]


def _rmse(a: Any, b: Any) -> float:
    return float(((a - b) ** 2).mean().sqrt()) if a.numel() else 0.0


def _nanmax(t: Any) -> float:
    import torch

    return float(torch.nan_to_num(t, nan=float("inf")).max()) if t.numel() else 0.0


def _max_abs(a: Sequence[Any], b: Sequence[Any]) -> float | None:
    """Largest difference between two runs; NaN in both places counts as equal."""
    import torch

    diffs = [torch.where(x.isnan() & y.isnan(), 0.0, (x.double() - y.double()).abs())
             for x, y in zip(a, b) if x.is_floating_point() and x.shape == y.shape]
    return _finite(max((_nanmax(d) for d in diffs), default=0.0))


def _finite(x: float | None) -> float | None:
    return x if x is not None and x == x and abs(x) != float("inf") else None


def _max_opt(*values: float | None) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None

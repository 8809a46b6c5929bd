"""FX reduction passes, in order of payoff; each is a named function of a `ReductionProblem[FxCase]`.

Contract: passes build candidates with `fx_case.build_case` / `fx_case.rebase` from the
problem's current case and change it only through the problem's gate (see `reduce.core`).
- `isolate_ops`: the smallest candidates first: one node alone (its tensor inputs cut), one per
  distinct (op, input metadata); the ops the failure's message names first, when the driver hands it over
  (a backend that rejects an op mostly says which: "no kernel for softmax", a `LoweringException`'s target), then
  rarest op first (the lowerings a graph uses everywhere are the best exercised), views after the ops of the same
  rarity that compute something (a view only re-labels memory: no compiler generates code for it), then graph
  order. Most compiler bugs are one lowering, so this usually ends the search in a batch or two whatever the
  graph's size; only the `MAX_ISOLATED` first are tried (past that it would cost more than bisection).
- `truncate_outputs`: binary search on the output point; the prefix returns every value that is
  live at the cut, as torch's minifier does.
- `truncate_inputs`: binary search on the input point; everything before it becomes new inputs
  with the same metadata.
- `ddmin_nodes`: delta debugging over the nodes that stay computed; the others become inputs.
- `drop_outputs`: delta debugging over the returned values (unused inputs vanish with them).
- `shrink_shapes`: every size to 1 at once, then one distinct size at a time to 1 or its half,
  both asked in one batch (every input dim of that size, and equal int inputs, together, so
  symbolic relations survive); `simplify_dtypes`: fp64/fp16/bf16 -> fp32.
"""

from __future__ import annotations

import collections
import functools
import re
from collections.abc import Sequence

import msgspec

from pt2doctor.model.minify import InputSpec, ScalarSpec, TensorSpec
from pt2doctor.reduce.core import ReductionProblem
from pt2doctor.reduce.fx_case import FxCase, build_case, op_name, rebase
from pt2doctor.reduce.passes import bisect_cut, ddmin

Problem = ReductionProblem[FxCase]
MAX_ISOLATED = 16


def _alone(case: FxCase, name: str) -> FxCase:
    """The graph computing only `name`, its tensor-valued call inputs replaced by new inputs. An
    input with no metadata (a multi-output node: a higher-order op whose `getitem` this is) stays,
    computed from inputs of its own, so the op travels whole, with its branch submodules."""
    node = next(n for n in case.call_nodes if n.name == name)
    return build_case(case.base, case.cuts | frozenset(_feeds(case, node)), [name])


def only_nodes(case: FxCase, names: Sequence[str]) -> FxCase | None:
    """The graph computing only the call nodes `names` (a kernel's fused nodes, `diagnose.runtime_triage`), every
    value they read from outside them made a new input, all of them returned; None when none of them is here."""
    wanted = set(names)
    keep = [n for n in case.call_nodes if n.name in wanted]
    if not keep:
        return None
    cuts = {cut for node in keep for feed in node.all_input_nodes
            if feed.name not in wanted and feed.op not in ("placeholder", "get_attr")
            for cut in ([feed.name] if feed.name in case.base.specs else _feeds(case, feed))}
    return build_case(case.base, case.cuts | frozenset(cuts), [n.name for n in keep])


def _feeds(case: FxCase, node: object) -> list[str]:
    feeds: list[str] = []
    for feed in node.all_input_nodes:  # type: ignore[attr-defined]
        if feed.op in ("placeholder", "get_attr"):
            continue
        feeds += [feed.name] if feed.name in case.base.specs else _feeds(case, feed)
    return feeds


def _op_class(case: FxCase, name: str) -> tuple[object, ...]:
    node = next(n for n in case.call_nodes if n.name == name)
    specs = case.base.specs
    return (op_name(node), specs.get(name), tuple(specs.get(n.name) for n in node.all_input_nodes))


def isolate_ops(problem: Problem, message: str = "") -> None:
    """`message`: the failure's text, whose named ops are tried first (see the module docstring)."""
    case = problem.current
    if case.node_count <= 1:
        return
    names = [n.name for n in case.call_nodes if n.name in case.base.specs]
    classes = [_op_class(case, name) for name in names]
    counts = collections.Counter(c[0] for c in classes)
    representatives = {c: name for c, name in reversed(list(zip(classes, names)))}  # first of each class wins
    order = {name: i for i, name in enumerate(names)}
    views = {n.name for n in case.call_nodes if getattr(n.target, "is_view", False)}  # OpOverload.is_view
    named = {n.name for n in case.call_nodes if message and _named_in(message, n)}
    chosen = sorted(representatives.items(),
                    key=lambda item: (item[1] not in named, counts[item[0][0]], item[1] in views, order[item[1]]))
    problem.consider_first([_alone(case, name) for _, name in chosen[:max(MAX_ISOLATED, 4 * problem.jobs)]])


def _named_in(message: str, node: object) -> bool:
    """Whether `message` names the node's op as a word of its own: `softmax` for `torch.softmax`, `aten.softmax.int`
    or the method `x.softmax` (a kernel's name, `cpp_fused_softmax_0`, is no mention)."""
    target = node.target  # type: ignore[attr-defined]
    name = (target if isinstance(target, str) else getattr(target, "__name__", "")).split(".")[0]
    return bool(name) and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", message) is not None


def _live_at(case: FxCase, k: int) -> tuple[list[str], list[str]]:
    """Split the current call nodes at `k`: (prefix names, prefix values used after the cut)."""
    nodes = case.call_nodes
    prefix = {n.name for n in nodes[:k]}
    live = [
        n.name for n in nodes[:k]
        if n.name in case.base.specs
        and (n.name in case.outputs or any(u.name not in prefix for u in n.users))
    ]
    return [n.name for n in nodes[:k]], live


def _prefix_case(case: FxCase, k: int) -> FxCase:
    _, live = _live_at(case, k)
    return build_case(case.base, case.cuts, live) if live else case


def _suffix_case(case: FxCase, m: int) -> FxCase:
    nodes = case.call_nodes
    _, live = _live_at(case, len(nodes) - m)
    return build_case(case.base, case.cuts | frozenset(live), case.outputs)


def truncate_outputs(problem: Problem) -> None:
    bisect_cut(problem, 1, problem.current.node_count, functools.partial(_prefix_case, problem.current))


def truncate_inputs(problem: Problem) -> None:
    bisect_cut(problem, 1, problem.current.node_count, functools.partial(_suffix_case, problem.current))


def _keep_nodes(case: FxCase, kept: Sequence[str]) -> FxCase:
    keep = set(kept)
    dropped = frozenset(n.name for n in case.call_nodes if n.name not in keep and n.name in case.base.specs)
    outputs = [o for o in case.outputs if o not in dropped]
    return build_case(case.base, case.cuts | dropped, outputs) if outputs else case


def ddmin_nodes(problem: Problem) -> None:
    case = problem.current
    ddmin(problem, [n.name for n in case.call_nodes if n.name in case.base.specs], functools.partial(_keep_nodes, case))


def _keep_outputs(case: FxCase, kept: Sequence[str]) -> FxCase:
    return build_case(case.base, case.cuts, kept) if kept else case


def drop_outputs(problem: Problem) -> None:
    case = problem.current
    ddmin(problem, case.outputs, functools.partial(_keep_outputs, case))


def _resize(spec: InputSpec, old_new: tuple[int, int]) -> InputSpec:
    old, new = old_new
    if isinstance(spec, ScalarSpec):
        return msgspec.structs.replace(spec, value=new) if spec.value == old and type(spec.value) is int else spec
    if old not in spec.shape:
        return spec  # keeps its saved value, if any
    shape = tuple(new if s == old else s for s in spec.shape)
    return msgspec.structs.replace(spec, shape=shape, stride=_restride(spec, shape), saved="")


def _restride(spec: TensorSpec, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Dense strides for `shape`, keeping the memory order the old strides implied."""
    order = sorted(range(len(shape)), key=lambda d: (spec.stride[d], spec.shape[d]))
    stride, step = [0] * len(shape), 1
    for d in order:
        stride[d] = step
        step *= max(shape[d], 1)
    return tuple(stride)


def shrink_shapes(problem: Problem) -> None:
    """Every size to 1 at once first (one query where sizes do not matter), then one size at a time."""
    sizes = sorted({s for spec in problem.current.inputs if isinstance(spec, TensorSpec) for s in spec.shape if s > 1},
                   reverse=True)
    if len(sizes) > 1 and _consider_resized(problem, {size: 1 for size in sizes}):
        return
    for size in sizes:
        _consider_resized(problem, {size: 1}, *([{size: size // 2}] if size > 3 else []))


def _consider_resized(problem: Problem, *resizes: dict[int, int]) -> bool:
    """Try each {old size: new size} map on the current inputs, one batch, the first preferred."""
    case = problem.current
    candidates = [rebase(case, [functools.reduce(_resize, resize.items(), spec) for spec in case.inputs])
                  for resize in resizes]
    return problem.consider_first([c for c in candidates if c is not None])


def simplify_dtypes(problem: Problem) -> None:
    for dtype in ("float64", "float16", "bfloat16"):
        case = problem.current
        specs = [msgspec.structs.replace(s, dtype="float32", saved="")
                 if isinstance(s, TensorSpec) and s.dtype == dtype else s for s in case.inputs]
        if specs != list(case.inputs):
            candidate = rebase(case, specs)
            if candidate is not None:
                problem.consider(candidate)


FX_PASSES = (isolate_ops, truncate_outputs, truncate_inputs, ddmin_nodes, drop_outputs, shrink_shapes, simplify_dtypes)

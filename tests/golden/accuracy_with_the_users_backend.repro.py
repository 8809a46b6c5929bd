"""Minimal repro written by pt2doctor; needs plain torch only.

pt2doctor minify: a golden example
Stage: dynamo.
Run `python repro.py`: it exits non-zero while the bug is present.
"""

import sys
import traceback

import torch
import torch._dynamo
import torch.fx

import torch._inductor.config
torch._inductor.config.compile_threads = 1  # one small graph: no compile worker pool

ACCURACY = True
TOLERANCE = 0.0001


def picky(gm, example_inputs):
    raise NotImplementedError("picky: no sigmoid")


BACKEND = picky


class Repro(torch.nn.Module):
    def forward(self, x):
        sigmoid = torch.sigmoid(x);  x = None
        return (sigmoid,)


def make_inputs():
    torch.manual_seed(0)
    args = [
        make_tensor((8,), (1,), torch.float16, 'cpu'),
    ]
    return args


class InvalidRepro(Exception):
    """Eager itself fails: this program does not show a compiler bug."""


def make_tensor(shape, stride, dtype, device, requires_grad=False, bounds=None, offset=0):
    extent = offset + (1 + sum((size - 1) * step for size, step in zip(shape, stride)) if all(shape) else 0)
    if dtype.is_floating_point or dtype.is_complex:
        storage = torch.randn(extent, dtype=dtype, device=device)
    elif dtype == torch.bool:
        storage = torch.rand(extent, device=device) > 0.5
    elif bounds is not None:  # the recorded range: indices stay in bounds
        storage = torch.randint(bounds[0], bounds[1] + 1, (extent,), dtype=dtype, device=device)
    else:
        storage = torch.zeros(extent, dtype=dtype, device=device)  # zeros are valid indices
    return storage.as_strided(shape, stride, offset).requires_grad_(requires_grad)


def synchronize():
    """Wait for the GPU: CUDA reports a kernel's error at a later call, which must be in the part that launched it."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def describe_failure(exc):
    while getattr(exc, "inner_exception", None) is not None:
        exc = exc.inner_exception
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return type(exc).__name__ + ": " + (lines[0].strip() if lines else "")


class AccuracyMismatch(Exception):
    """Compiled and eager results differ beyond the fp64-referenced tolerance."""

"""pt2doctor's accuracy rule: the fp64 reference, the comparison, the RNG guard and the random-op test.

Contract: the one definition that every judge of a compiled graph against eager uses: the probe of
`pt2doctor accuracy` (capture.child.accuracy_probe), the recorder's check (capture.child.graph_recorder) and every
repro the minifier writes (reduce.repro embeds this file's text verbatim, `accuracy_rule_source()`),
so the minifier's oracle and `python repro.py` judge a graph exactly as the probe did. It therefore
imports only the standard library and torch, and has no `from __future__` import (one must open a file).
- `copy_inputs(args, fp64=False)`: copies with the same sizes, strides and storage offsets, inputs
  that share a storage sharing one copy (in fp64: floating tensors cast, through that shared copy);
  a check never runs a graph on the program's own tensors.
- `fp64_module(mod)`: `mod` computing in float64: parameters, buffers, tensor constants and the
  float dtypes the graph names itself (`.float()`, `dtype=`, `.to(torch.float32)`), as torch's
  `cast_dtype_args_to_fp64` does for after-AOT graphs; a bitcast `.view(dtype)` is left alone.
- `reference_runs(eager, args, grads=False)`: eager in fp32 and the fp64 reference, each on copies and from the
  RNG state of the call, which is restored afterwards (so the compiled call draws what it would); with `grads`,
  each followed by its backward (`with_grads`).
- `same_as_fp64_reference(mod, args, expected, actual, tol, grads=False, state=None)`: the verdict for a caller that
  ran eager itself (`reference_runs(..., fp64=False)`) and the compiled call: the fp64 reference runs only where an
  output is not allclose to eager's (`same` answers from allclose first either way, and an fp64 run costs more than
  the fp32 one: most graphs pass), on copies of `args` (as they were before the compiled call) from RNG `state`
  (the call's: `rng_state()` before it).
- `with_grads(fn)`: `fn` followed by its backward, as `same_two_models` checks a Dynamo graph: its outputs, then
  the gradients of the sum of its floating outputs that require grad with respect to each input that requires
  grad (None where one gets none; `()` where nothing requires grad). The backward a compiled `fn` runs is the
  compiled one: a wrong gradient shows on a forward graph.
- `same_outputs(expected, actual, reference, tol)`: the verdict. A tensor output keeps its dtype and
  shape. A floating one is judged by `torch._dynamo.utils.same` (as `same_two_models`: allclose, else
  RMSE(actual, fp64) within a multiple of RMSE(expected, fp64)); without an fp64 value (the fp64 run
  raised; the output stays float32 in it) by allclose alone. Any other (integer, bool) must be equal.
  Where eager's value is not finite (an infinity, or a nan the fp64 reference has too), or eager's is finite and
  compiled's is not, compiled's must be eager's or close to the fp64 reference's (`non_finite_kept`): `same` passes
  an output whose RMSE against fp64 is nan, as it is wherever eager has an infinity (inf - inf) or a nan, so it
  passed a compiled nan where eager has -inf, and a compiled 0 for the mean of nothing (nan in eager and fp64).
- `kept_state()`: the guard around every check: the RNG state and functorch's transform stack restored.
- `draws(node)` / `random_ops(gm)`: which FX calls draw random numbers; `names_a_random_op(name)` the rule by name.
Private torch APIs (checked on 2.13): `torch._dynamo.utils.same`, `torch.fx.node._get_qualified_name`,
`torch._C._functorch`: `get_dynamic_layer_stack_depth`, `peek_interpreter_stack`, the `_*_decrement_nesting`.
"""

import copy
import re
from contextlib import contextmanager

import torch
import torch.fx


def copy_inputs(args, fp64=False):
    """Copies of `args` keeping sizes, strides, storage offsets and aliasing; with `fp64`, floating ones in float64."""
    storages = {}
    return [_copy_input(a, storages, fp64) for a in args]


def _copy_input(value, storages, fp64):
    if not isinstance(value, torch.Tensor):
        return value
    grad = value.requires_grad and (value.is_floating_point() or value.is_complex())
    dtype = torch.float64 if fp64 and value.is_floating_point() else value.dtype
    plain = type(value) in (torch.Tensor, torch.nn.Parameter) and value.layout == torch.strided and not value.is_meta
    try:
        storage = value.untyped_storage() if plain else None
    except (RuntimeError, NotImplementedError):  # a functorch wrapper has no storage of its own
        storage = None
    if storage is None:  # a subclass, sparse, a wrapper: no storage to share
        out = value.detach().clone().to(dtype)
        return out.requires_grad_() if grad else out
    key = (storage.data_ptr(), str(value.device), value.dtype)  # a bitcast view of a storage gets a copy of its own
    if key not in storages:
        with torch.no_grad():
            flat = torch.empty(0, dtype=value.dtype, device=value.device).set_(storage)
            storages[key] = flat.to(dtype, copy=True).untyped_storage()
    with torch.no_grad():
        out = torch.empty(0, dtype=dtype, device=value.device)
        out.set_(storages[key], value.storage_offset(), value.size(), value.stride())
    return out.requires_grad_() if grad else out


def fp64_module(mod):
    """A copy of `mod` computing in float64 (see the contract); a module FX cannot trace gets its
    parameters and buffers cast only."""
    module = copy.deepcopy(mod)
    if not isinstance(module, torch.fx.GraphModule):
        try:
            module = torch.fx.symbolic_trace(module)
        except Exception:
            return module.to(torch.float64)
    module = module.to(torch.float64)  # parameters and buffers
    for graph_module in [m for m in module.modules() if isinstance(m, torch.fx.GraphModule)]:
        _fp64_graph(graph_module)
    return module


def _fp64_graph(gm):
    from torch.fx.node import map_aggregate

    for node in gm.graph.nodes:
        if node.op == "get_attr":  # a tensor constant Dynamo stored as a plain attribute
            owner, _, name = str(node.target).rpartition(".")
            holder = gm.get_submodule(owner)
            value = getattr(holder, name, None)
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                setattr(holder, name, value.to(torch.float64))
        elif node.op in ("call_function", "call_method") and not _bitcast(node):
            if node.op == "call_method" and node.target in ("float", "half", "bfloat16"):
                node.target = "double"
            node.args, node.kwargs = map_aggregate((node.args, node.kwargs), _fp64_dtype)
    gm.recompile()


def _fp64_dtype(value):
    return torch.float64 if isinstance(value, torch.dtype) and value.is_floating_point else value


def _bitcast(node):
    """`x.view(dtype)` reinterprets bits: its dtype must stay."""
    target = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    return target == "view"


def reference_runs(eager, args, fp64=True, grads=False):
    """(expected, reference): `eager` on copies of `args`, and (with `fp64`) its fp64 copy on fp64
    copies, both from the RNG state of the call, which is restored when done; with `grads`, each with its
    backward (`with_grads`). `expected` raises what eager raises; `reference` is None where the fp64 run raises
    (an op without an fp64 kernel)."""
    run = with_grads if grads else (lambda fn: fn)
    with kept_state():
        state = rng_state()
        expected = run(eager)(*copy_inputs(args))
        reference = fp64_reference(eager, args, grads, state) if fp64 else None
    return expected, reference


def fp64_reference(eager, args, grads=False, state=None):
    """`eager`'s fp64 copy on fp64 copies of `args` (with `grads`, with its backward), from RNG `state` where given,
    the RNG state restored when done; None where it raises (an op without an fp64 kernel)."""
    run = with_grads if grads else (lambda fn: fn)
    with kept_state():
        if state is not None:
            set_rng_state(state)
        try:
            return run(fp64_module(eager))(*copy_inputs(args, fp64=True))
        except Exception:
            return None


def with_grads(fn):
    """`fn` followed by its backward (see the contract)."""
    from torch.utils._pytree import tree_leaves

    def run(*args):
        outputs = fn(*args)
        wanted = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        losses = [o.sum() for o in tree_leaves(outputs)
                  if isinstance(o, torch.Tensor) and o.requires_grad and o.is_floating_point()]
        if not wanted or not losses:
            return outputs, ()
        return outputs, torch.autograd.grad(sum(losses), wanted, allow_unused=True)

    return run


def same_outputs(expected, actual, reference, tolerance):
    """Whether `actual` (compiled) matches `expected` (eager), judged against `reference` (fp64)."""
    from torch.utils._pytree import tree_leaves

    def leaves(tree):
        return tree_leaves(tree, is_leaf=lambda x: x is None)  # a None output keeps its place

    expected, actual = leaves(expected), leaves(actual)
    references = leaves(reference) if reference is not None else []
    if len(expected) != len(actual):
        return False
    if len(references) != len(expected):
        references = [None] * len(expected)
    return all(same_output(e, a, r, tolerance) for e, a, r in zip(expected, actual, references))


def same_output(expected, actual, reference, tolerance):
    """One output (see the contract); a plain int or bool must be equal, other values are not judged."""
    from torch._dynamo.utils import same

    if not isinstance(expected, torch.Tensor):
        return expected == actual if isinstance(expected, (bool, int)) else True
    if not (isinstance(actual, torch.Tensor) and actual.dtype == expected.dtype and actual.shape == expected.shape):
        return False
    expected, actual = expected.detach(), actual.detach()
    if not (expected.is_floating_point() or expected.is_complex()):
        return bool(torch.equal(expected, actual.to(expected.device)))
    fp64 = isinstance(reference, torch.Tensor) and reference.dtype == torch.float64
    reference = reference.detach() if fp64 else None
    if not non_finite_kept(expected, actual.to(expected.device), reference, tolerance):
        return False
    return bool(same(expected, actual, reference, tol=tolerance, equal_nan=True, ignore_non_fp=fp64,
                     log_error=lambda *args, **kwargs: None))


def non_finite_kept(expected, actual, reference, tolerance):
    """Where eager's value is an infinity, or a nan the fp64 reference has too, or eager's is finite and compiled's
    is not, compiled's equals eager's (the same infinity, a nan) or is close to the fp64 reference's. A nan of eager's
    that the fp64 reference does not have (or without a reference) is left to `same`: compiled may be the more exact."""
    if expected.is_complex():
        return True
    reference = reference.to(expected.device) if reference is not None else None
    strict = torch.isinf(expected) | (torch.isfinite(expected) & ~torch.isfinite(actual))
    if reference is not None:
        strict |= torch.isnan(expected) & torch.isnan(reference)
    if not bool(strict.any()):
        return True
    kept = torch.isclose(actual, expected, rtol=0, atol=0, equal_nan=True)
    if reference is not None:
        kept |= torch.isclose(actual.double(), reference, rtol=tolerance, atol=tolerance, equal_nan=True)
    return bool(kept[strict].all())


def same_as_fp64_reference(mod, args, expected, actual, tolerance, grads=False, state=None):
    """`same_outputs` of eager's `expected` and compiled's `actual`, for a caller that ran eager itself: allclose, else
    against the fp64 reference of `mod` on `args`, run only then, from RNG `state` where given (with `grads`, with its
    backward: `with_grads`)."""
    if same_outputs(expected, actual, None, tolerance):  # allclose (strictly: bool outputs compared too)
        return True
    return same_outputs(expected, actual, fp64_reference(mod, args, grads, state), tolerance)


def rng_state():
    """The CPU RNG state, and every CUDA device's where CUDA is in use."""
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    return torch.get_rng_state(), cuda


def set_rng_state(state):
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state_all(state[1])


@contextmanager
def kept_state():
    """The RNG state is restored when the block ends, so the program's own call draws what it would
    have; and functorch's transform stack, which a graph that raises between the increment and the
    decrement of a `torch.func` level leaves one deeper (undone as Dynamo undoes it on an error)."""
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    depth = torch._C._functorch.get_dynamic_layer_stack_depth()
    try:
        with torch.random.fork_rng(devices=list(range(torch.cuda.device_count())) if cuda else []):
            yield
    finally:
        undo_functorch_levels(depth)


def undo_functorch_levels(depth):
    """Leave functorch's transform stack `depth` deep, undoing each level above as its own transform
    does. Not `torch._C._functorch.pop_dynamic_layer_stack_and_undo_to_depth`: on torch 2.11 it
    pops every level twice and fails an internal assert (fixed later: pytorch/pytorch#177585)."""
    functorch = torch._C._functorch
    undo = {functorch.TransformType.Grad: functorch._grad_decrement_nesting,
            functorch.TransformType.Vmap: functorch._vmap_decrement_nesting,
            functorch.TransformType.Jvp: functorch._jvp_decrement_nesting,
            functorch.TransformType.Functionalize: functorch._func_decrement_nesting}
    while functorch.get_dynamic_layer_stack_depth() > depth:
        undo[functorch.peek_interpreter_stack().key()]()


# One segment of an op's qualified name (`torch.rand`, `Tensor.normal_`, `functional.dropout`, after AOTAutograd's
# decomposition for Inductor `prims.inductor_random`), so `torch.nn.functional.normalize` or `Tensor.expand` never
# match.
_RANDOM = re.compile(r"^(rand|bernoulli|multinomial|normal_?$|uniform|exponential|poisson|cauchy|geometric|log_normal)"
                     r"|dropout|rrelu|^inductor_(random|randint|seeds?|lookup_seed)$")


def names_a_random_op(name):
    """Whether a qualified op name (`aten.native_dropout.default`, `torch.rand`, `l_x_.bernoulli_`) is a random op's,
    by its segments after the first: the one rule for the accuracy check here, the bisector and the settings table."""
    return any(_RANDOM.search(s) for s in name.lower().split(".")[1:])


def random_ops(gm):
    """The graph's ops that draw random numbers when they run, by qualified name."""
    nodes = (n for n in gm.graph.nodes if n.op in ("call_function", "call_method") and draws(n))
    return tuple(dict.fromkeys(op_name(n) for n in nodes))


def draws(node):
    """Whether an FX call draws: a random op, except a dropout that cannot (p=0 or training=False:
    it returns its input, `F.dropout`) and an rrelu outside training (its slope is then fixed). A
    value the graph computes (a SymFloat p) may draw."""
    name = op_name(node)
    if not names_a_random_op(name):
        return False
    segments = name.lower().split(".")[1:]
    if any("dropout" in s for s in segments):  # (input, p=0.5, training=True) for every dropout (2.13)
        return _arg(node, 1, ("p",), 0.5) != 0 and _arg(node, 2, ("training", "train"), True) is not False
    if any("rrelu" in s for s in segments):  # (input, lower, upper, training=False)
        return _arg(node, 3, ("training",), False) is not False
    return True


def _arg(node, index, names, default):
    found = next((node.kwargs[n] for n in names if n in node.kwargs), default)
    return node.args[index] if len(node.args) > index else found


def op_name(node):
    """`torch.relu`, `aten.relu.default`, `Tensor.add_`, a submodule's name: how an FX node's call is named."""
    from torch.fx.node import _get_qualified_name

    if node.op == "call_method":
        return f"Tensor.{node.target}"
    if node.op == "call_module" or isinstance(node.target, str):
        return str(node.target)
    try:
        return _get_qualified_name(node.target).removeprefix("torch.ops.")
    except Exception:
        return str(node.target)


def compile_repro(mod, args):
    return torch.compile(mod, backend=BACKEND, fullgraph=True)


def check():
    mod = Repro()
    args = make_inputs()
    try:
        expected, _ = reference_runs(mod, args, fp64=False)
        synchronize()
    except Exception as e:
        raise InvalidRepro(f"eager run fails: {type(e).__name__}") from e
    state, before = rng_state(), copy_inputs(args)  # the fp64 reference's, where it is needed
    actual = compile_repro(mod, args)(*args)
    synchronize()
    if not same_as_fp64_reference(mod, before, expected, actual, TOLERANCE, state=state):
        raise AccuracyMismatch("compiled result differs from eager beyond the fp64-referenced tolerance")


if __name__ == "__main__":
    try:
        check()
    except Exception as e:
        traceback.print_exc()
        print("PT2DOCTOR REPRO FAILED: " + describe_failure(e), file=sys.stderr)
        sys.exit(1)
    print("repro passed: the failure did not reproduce")

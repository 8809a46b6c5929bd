"""The inputs of a short form (`reduce.short_repro`): the lines that make them with public torch calls.

Contract: `made_inputs(specs) -> (lines, fresh) | None` is a pure function of a graph's `InputSpec`s: `args = [...]`
(on one line where it fits, else packed under the first input, else an input a line) with what it needs before it
(the saved values' `torch.load`, `torch.manual_seed(0)` where a factory draws, one tensor per group of inputs that
are views of one storage) and after it (`torch._dynamo.mark_dynamic` where a size was symbolic when it failed);
`fresh`: the inputs are views of one tensor, made again for each call (a clone of each would no longer share it).
A tensor is `torch.randn` (floats), `torch.rand(...) > 0.5` (bool), `torch.randint` over its recorded range, else
`torch.zeros` (zeros are valid indices); a factory's default dtype is left out; strided ones are `as_strided` views
of their storage; saved values are `saved[name]`; autograd's ZeroTensors `torch._efficientzerotensor`. None where
views of one storage require grad (their autograd history over the shared storage: the harness form says it).
"""

from __future__ import annotations

from pt2doctor.model.minify import InputSpec, ScalarSpec, TensorSpec
from pt2doctor.reduce.repro import storage_extent, storage_groups, storage_root

_FLOATS = ("float", "bfloat16", "complex")
_ONE_LINE = 100  # the inputs on one line up to this long (the test indents it by 8: within the 120 of the style)


def made_inputs(specs: tuple[InputSpec, ...]) -> tuple[list[str], bool] | None:
    """See the module's contract."""
    bases = _bases(specs)
    if bases is None:
        return None
    base_lines, views = bases
    inputs = [views.get(id(spec)) or _input(spec) for spec in specs]
    saved = any(isinstance(s, TensorSpec) and s.saved for s in specs)
    made = (['saved = torch.load(Path(__file__).with_name("repro_inputs.pt"), weights_only=True)'] if saved else [])
    made += ["torch.manual_seed(0)"] if any(_RANDOM in made for made in [*base_lines, *inputs]) else []
    made += base_lines
    if inputs:
        made += _args_lines(inputs, specs)
    made += [f"torch._dynamo.mark_dynamic(args[{i}], {dim})" for i, spec in enumerate(specs)  # as it failed
             if isinstance(spec, TensorSpec) for dim in spec.dynamic]
    return made, bool(base_lines)


def _args_lines(inputs: list[str], specs: tuple[InputSpec, ...]) -> list[str]:
    """`args = [...]` on one line where it fits; saved values as they are (a backward graph's saved activations and
    tangents) by their names; else packed over lines, continued under the first input, where each fits a line; else
    an input a line."""
    one_line = f"args = [{', '.join(inputs)}]"
    if len(one_line) <= _ONE_LINE:
        return [one_line]
    names = [s.saved for s in specs if isinstance(s, TensorSpec)]
    if len(names) == len(inputs) and inputs == [f"saved[{n!r}]" for n in names]:
        return [*_packed("names = [", [repr(n) for n in names], "]"), "args = [saved[name] for name in names]"]
    if all(len(made) + len("args = [],") <= _ONE_LINE for made in inputs):
        return _packed("args = [", inputs, "]")
    return ["args = [", *(f"    {made}," for made in inputs), "]"]


def _packed(opening: str, items: list[str], closing: str) -> list[str]:
    """`opening` items `closing` over as few lines as fit `_ONE_LINE`, continued under the first item, breaking only
    between items (which may hold spaces)."""
    lines, line = [], opening
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else closing)
        if line != opening and len(line) + 1 + len(piece) > _ONE_LINE:
            lines.append(line)
            line = " " * len(opening) + piece
        else:
            line += ("" if line == opening else " ") + piece
    return [*lines, line]


def _bases(inputs: tuple[InputSpec, ...]) -> tuple[list[str], dict[int, str]] | None:
    """The lines making one tensor per group of inputs that are views of one storage (`reduce.repro.storage_groups`),
    and each member's view of it, by `id` of its spec: the root (the member dense over the whole storage, from
    offset 0) is the tensor itself, as the program had it, the others `as_strided` views of it. None where a
    member requires grad (its autograd history over the shared storage: the harness form says it)."""
    lines: list[str] = []
    views: dict[int, str] = {}
    for index, members in enumerate(storage_groups(inputs).values()):
        if any(m.requires_grad for m in members):
            return None
        name, first, root = f"base{index}", members[0], storage_root(members)
        bounds = [m.bounds for m in members if m.bounds]
        span = (min(b[0] for b in bounds), max(b[1] for b in bounds)) if bounds else None
        saved = first.saved if all(m.saved == first.saved for m in members) else ""
        flat = TensorSpec((max(storage_extent(m) for m in members),), (1,), first.dtype, first.device, saved=saved,
                          bounds=span)
        if root is None:
            made = _input(flat)
        elif not saved and _dense_strides(root.shape) == root.stride:
            made = _input(TensorSpec(root.shape, root.stride, root.dtype, root.device, bounds=span))
        else:
            made = f"{_input(flat)}.as_strided({root.shape!r}, {root.stride!r}).clone()"
        lines.append(f"{name} = {made}")
        views |= {id(m): name if m is root else f"{name}.as_strided({m.shape!r}, {m.stride!r}, {m.offset})"
                  for m in members}
    return lines, views


_RANDOM = "torch.rand"  # torch.randn, torch.rand, torch.randint: what the seed makes repeatable


def _input(spec: InputSpec) -> str:
    if isinstance(spec, ScalarSpec):
        return repr(spec.value)
    device = "" if spec.device == "cpu" else f", device={spec.device!r}"
    if spec.zero:  # autograd's efficient zeros (no storage), as the program passed them: only a private call makes one
        return f"torch._efficientzerotensor({spec.shape!r}, dtype=torch.{spec.dtype}{device})"
    # a non-leaf that requires grad: a leaf's clone (it has a grad_fn, as the graph's input had)
    grad = (".requires_grad_()" + ("" if spec.leaf else ".clone()")) if spec.requires_grad else ""
    if spec.saved:
        return f"saved[{spec.saved!r}]" + ("" if not device else f".to({spec.device!r})") + grad
    dense = _dense_strides(spec.shape) == spec.stride and not spec.offset
    shape = spec.shape if dense else (storage_extent(spec),)
    if spec.dtype.startswith(_FLOATS):
        made = f"torch.randn({shape!r}{_dtype(spec.dtype, 'float32')}{device})"
    elif spec.dtype == "bool":
        made = f"torch.rand({shape!r}{device}) > 0.5"
    elif spec.bounds is not None:
        made = f"torch.randint({spec.bounds[0]}, {spec.bounds[1] + 1}, {shape!r}{_dtype(spec.dtype, 'int64')}{device})"
    else:
        made = f"torch.zeros({shape!r}, dtype=torch.{spec.dtype}{device})"
    if not dense:
        made = f"({made}).as_strided({spec.shape!r}, {spec.stride!r}, {spec.offset})"
    return made + grad


def _dtype(dtype: str, default: str) -> str:
    """A factory's `dtype=` argument, left out where it is the factory's default in a fresh interpreter (repro.py sets
    no default dtype)."""
    return "" if dtype == default else f", dtype=torch.{dtype}"


def _dense_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))

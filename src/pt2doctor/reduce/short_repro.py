"""The minimal graph in PyTorch's own idiom: a short script and a regression test a maintainer can paste.

Contract: `render_short(script, draws)` and `render_test(script, draws)` are pure, byte-stable functions of a
`ReproScript` (`reduce.repro`), or None where the short form cannot say what the harness form says. The
short form is a function of plain torch calls (the graph's own code: the torch calls Dynamo recorded, or
aten ops after AOT), its inputs made with `torch.randn`/`torch.randint`/literals (`reduce.short_inputs`; or the
saved values, `repro_inputs.pt`, where the failure needs them; autograd's ZeroTensors with
`torch._efficientzerotensor`, the one private call that makes one), `torch.compile(fn, backend=...)` (a backend
defined in the user's script: its source, as the recording took it, `backend=` its name), and
`torch.testing.assert_close(compiled, eager)` (exact for integer and bool tensors, NaN where eager has NaN
equal, as `TestCase.assertEqual` has it; its first line the same
for both, `MISMATCH`), and `torch._dynamo.mark_dynamic` where a size was symbolic when it failed; nothing else: no
accuracy rule, no input factory. Inputs that are views of one storage are one tensor and views of it, made
again for each call (`def make_args()`: a clone of each would no longer share it). A graph that `draws` random
numbers is compared on what a draw cannot change, each output's dtype and shape (compiled code draws its own
numbers). The test is the same check as a `torch.testing._internal.common_utils.TestCase` with `run_tests()`.

`at_torch_level(text)` writes a short form's aten ops as the public torch functions of the same name and
arguments (`torch.ops.aten.cumsum.default(x, 1)` -> `torch.cumsum(x, 1)`), where torch has one; prims and
private ops stay. It may take another path through the compiler: `diagnose` verifies it before it prefers it.
`inductor_alone(text, aten)` is the aten form with its graph compiled by Inductor alone, as the minifier's harness
does (through a `torch.compile` backend that hands the graph to `compile_fx_inner`: private API, where the bug
lives, when the aten graph traced again by AOTAutograd no longer shows it): an after-AOT graph as written,
another first recorded in aten ops by `make_fx`.

A Dynamo graph judged with its backward (`ReproScript.grads`) calls each side through `grads(f, *args)` (`GRADS`):
its outputs and the gradients of their sum with respect to the inputs that require grad, compared together.
One the program compiled under `torch.no_grad()` makes both calls in a `with torch.no_grad():` block.
A backward graph of Inductor's is its aten form compiled as `bw_compiler` compiled it (`inductor_alone` with
`is_backward=True`), its inputs the saved activations and tangents it was given.

What has no short form (None): an exported program (AOTInductor), another backend's backward graph, a backend of the
user's whose source the recording could not take (the harness form's stub), views of one storage that require grad,
a graph with submodules or attributes (higher-order ops), and private functions
tracing must record itself (functorch's scaffolding). `diagnose` verifies the short form both ways in fresh
interpreters before it hands it over (`diagnose.short_repro`); the harness form stays the minifier's, as
`repro_graph.py`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from pt2doctor.model.minify import BackendKind, Stage, TensorSpec
from pt2doctor.reduce.repro import ReproScript, ops_to_record
from pt2doctor.reduce.short_inputs import made_inputs


def render_short(script: ReproScript, draws: bool = False) -> str | None:
    """`draws`: the graph draws random numbers (`torch_compat.random_ops`)."""
    pieces = _pieces(script, draws)
    if pieces is None:
        return None
    check = (f"assert actual == expected, {MISMATCH!r} + f'{{actual}} != {{expected}}'" if draws else
             f"torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: {MISMATCH!r} + m)")
    return _compiled_as_it_was(script, _blocks(
        _opening(pieces.header.format(run="`python repro.py` raises"), _imports(script), pieces.config),
        pieces.backend, pieces.function, GRADS if pieces.grads else "", pieces.make_args,
        "\n".join(pieces.body(check))))


# The short form's first line when compiled and eager differ: the same for floats ("not close") and integers
# ("not equal"), so that one failure identity verifies either (`diagnose.short_repro`).
MISMATCH = "compiled differs from eager\n"


def render_test(script: ReproScript, draws: bool = False) -> str | None:
    pieces = _pieces(script, draws)
    if pieces is None:
        return None
    test = "\n".join(["class TestRepro(TestCase):", "    def test_compiled_matches_eager(self):",
                      *("        " + line for line in pieces.body("self.assertEqual(actual, expected)"))])
    imports = _imports(script) + "\nfrom torch.testing._internal.common_utils import TestCase, run_tests"
    return _compiled_as_it_was(script, _blocks(
        _opening(pieces.header.format(run="`python test_repro.py` fails"), imports, pieces.config), pieces.backend,
        pieces.function, GRADS if pieces.grads else "", pieces.make_args, test,
        'if __name__ == "__main__":\n    run_tests()'))


def _compiled_as_it_was(script: ReproScript, text: str) -> str | None:
    """A backward graph is compiled as AOTAutograd's `bw_compiler` compiled it: by Inductor alone, as a backward
    graph (`inductor_alone`); `torch.compile` would trace it again as a forward graph of its own."""
    return inductor_alone(text, aten=True, backward=True) if script.backward else text


@dataclass(frozen=True, slots=True)
class _Pieces:
    """What both forms share: the docstring (`{run}` left to fill), config lines, `def fn`, inputs, the compile."""

    header: str
    config: str
    function: str
    inputs: list[str]
    compiled: str
    backend: str = ""  # a backend defined in the user's script: its source but its imports (`_imports` has those)
    draws: bool = False  # the graph draws random numbers: compiled code draws its own (Inductor's RNG)
    fresh: bool = False  # inputs are views of one tensor: made again for each call (`make_args`), not cloned
    grads: bool = False  # each call followed by its backward (`GRADS`), the gradients compared too
    no_grad: bool = False  # both calls under `torch.no_grad()` (`ReproScript.without_grad`)

    def body(self, check: str) -> list[str]:
        compare = [_DRAWN, "actual, expected = [[(t.dtype, t.shape) for t in out] for out in (actual, expected)]",
                   check] if self.draws else [check]
        eager, compiled = ("grads(fn, ", f"grads({self.compiled}, ") if self.grads else ("fn(", f"{self.compiled}(")
        made: list[str] = []
        if not self.inputs:
            calls = [f"expected = {eager})", f"actual = {compiled})"]
        elif self.fresh:
            calls = [f"expected = {eager}*make_args())", f"actual = {compiled}*make_args())"]
        else:  # eager on copies: a graph that writes into its inputs must not change what the compiled call is given
            made = self.inputs
            calls = [f"expected = {eager}*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])",
                     f"actual = {compiled}*args)"]
        if self.no_grad:
            calls = ["with torch.no_grad():  # as the program compiled it", *("    " + line for line in calls)]
        return [*made, *calls, *compare]

    @property
    def make_args(self) -> str:
        """`def make_args()`: the inputs made anew for each call, where they are views of one tensor (a clone
        of each would no longer share it)."""
        if not self.fresh:
            return ""
        return "\n".join(["def make_args():  # views of one tensor, as the program passed them",
                          *("    " + line for line in self.inputs), "    return args"])


_DRAWN = "# fn draws random numbers, which compiled code draws its own way: compare what a draw cannot change"

# A wrong gradient of a forward graph: each call with its backward, as `accuracy_rule.with_grads` runs it.
GRADS = '''def grads(f, *args):  # f's outputs, and the gradients of their sum w.r.t. the inputs requiring grad
    out = f(*args)
    loss = sum(o.sum() for o in out if isinstance(o, torch.Tensor) and o.requires_grad and o.is_floating_point())
    wanted = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    return out, torch.autograd.grad(loss, wanted, allow_unused=True)'''


def _opening(docstring: str, imports: str, config: str) -> str:
    """The docstring, the imports, and the config lines a blank line below them."""
    return f"{docstring}\n{imports}" + (f"\n\n{config}" if config else "")


def _blocks(*blocks: str) -> str:
    """Top-level blocks two blank lines apart, as PEP 8 has them."""
    return "\n\n\n".join(b for b in blocks if b) + "\n"


def _pieces(script: ReproScript, draws: bool) -> _Pieces | None:
    if script.stage not in (Stage.DYNAMO, Stage.AOT) or script.backend.kind is BackendKind.STUB:
        return None
    if script.backward and script.backend.name != "inductor":  # another backend's own bw_compiler: the harness's
        return None
    if script.grads and draws:  # compared on dtypes and shapes only: no gradient would show
        return None
    function, inputs = _function(script), made_inputs(script.inputs)
    if function is None or inputs is None:
        return None
    made, fresh = inputs
    header = [line.replace("{", "{{").replace("}", "}}") for line in script.header]
    grads = script.grads and script.accuracy
    judged = "The gradients are compared too (the backward is where it goes wrong): " if grads else ""
    docstring = '"""' + "\n".join([*header, judged + "{run} while the bug is present."]) + '\n"""'
    named = script.backend.kind is BackendKind.NAMED
    backend = repr(script.backend.name) if named else script.backend.name
    compiled = f"torch.compile(fn, backend={backend}, fullgraph=True)"
    config = "\n".join(line for line in script.config_lines if not line.startswith("import "))  # `_imports` has those
    return _Pieces(docstring, config, function, made, compiled, _backend_source(script)[1], draws, fresh=fresh,
                   grads=grads, no_grad=script.without_grad)


def _imports(script: ReproScript) -> str:
    saved = any(isinstance(s, TensorSpec) and s.saved for s in script.inputs)
    config = [line for line in script.config_lines if line.startswith("import ")]
    lines = ["import torch", *config, *_backend_source(script)[0]]
    return ("from pathlib import Path\n\n" if saved else "") + "\n".join(dict.fromkeys(lines))


def _backend_source(script: ReproScript) -> tuple[list[str], str]:
    """A backend defined in the user's script: its source's top-level import statements, and the rest."""
    if script.backend.kind is not BackendKind.SOURCE:
        return [], ""
    source = script.backend.source
    imports = [n for n in ast.parse(source).body if isinstance(n, (ast.Import, ast.ImportFrom))]
    taken = {i for n in imports for i in range(n.lineno, (n.end_lineno or n.lineno) + 1)}
    rest = "\n".join(line for i, line in enumerate(source.splitlines(), 1) if i not in taken)
    return [ast.get_source_segment(source, n) or ast.unparse(n) for n in imports], rest.strip()


def _function(script: ReproScript) -> str | None:
    """The graph's forward as `def fn(...)`, with the prelude names it uses; None where it needs `self`, or calls
    what Dynamo cannot trace again from code (higher-order ops, functorch's private scaffolding: `reduce.repro`).
    Ops on no input (`iota`, `full`) and public functions `__torch_function__` does not see (`torch.normal`) are
    fine here: Dynamo traces them, only FX's symbolic tracing needs them recorded."""
    if any(op.startswith("higher_order.") or (op.startswith("torch.") and "._" in op)
           for op in ops_to_record(script.forward_code, script.prelude)):
        return None
    tree = ast.parse(script.forward_code)
    forward = next((n for n in tree.body if isinstance(n, ast.FunctionDef)), None)
    if forward is None or any(isinstance(n, ast.Name) and n.id == "self"
                              for n in ast.walk(ast.Module(forward.body, []))):
        return None
    forward.name = "fn"
    forward.args.args = forward.args.args[1:]  # self
    code = ast.unparse(_DeviceLiterals().visit(_without_frees(forward)))
    used = {n.id for n in ast.walk(forward) if isinstance(n, ast.Name)}
    prelude = [line for line in script.prelude if line.split("=", 1)[0].strip() in used]
    return "\n".join([*prelude, *(["", ""] if prelude else []), code])


def _without_frees(forward: ast.FunctionDef) -> ast.FunctionDef:
    """FX ends lines with `x = None` to free values early: a reader needs none of it."""
    def frees(node: ast.stmt) -> bool:
        return (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is None
                and all(isinstance(t, ast.Name) for t in node.targets))
    forward.body = [s for s in forward.body if not frees(s)] or [ast.Pass()]
    return forward


class _DeviceLiterals(ast.NodeTransformer):
    """FX writes a device as `device(type='cuda', index=0)`, which needs `device = torch.device` above the function;
    every torch call that takes a device takes its string, `'cuda:0'`."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if not (isinstance(node.func, ast.Name) and node.func.id == "device" and not node.args):
            return node
        words = {k.arg: k.value.value for k in node.keywords if isinstance(k.value, ast.Constant)}
        kind, index = words.get("type"), words.get("index")
        if set(words) - {"type", "index"} or len(words) != len(node.keywords) or not isinstance(kind, str):
            return node
        return ast.Constant(kind if index is None else f"{kind}:{index!s}")


def at_torch_level(text: str) -> str | None:
    """`text` with every `torch.ops.aten.NAME.OVERLOAD(...)` call that has a public `torch.NAME` written as that
    (the arguments as they are); None when no call has one, or where Inductor compiles fn's graph as written
    (`inductor_alone`: a backward graph), which must stay in aten ops."""
    import torch

    if _ALONE in text:
        return None
    tree = ast.parse(text)
    renamed = 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _aten_name(node.func)
        if name is not None and not name.startswith("_") and callable(getattr(torch, name, None)):
            node.func = ast.Attribute(ast.Name("torch", ast.Load()), name, ast.Load())
            renamed += 1
    if not renamed:
        return None
    lines = text.splitlines(keepends=True)
    for node in tree.body:  # only the function's lines change; the docstring and the rest stay as written
        if isinstance(node, ast.FunctionDef):
            lines[node.lineno - 1:node.end_lineno] = [ast.unparse(node) + "\n"] + [""] * (
                (node.end_lineno or node.lineno) - node.lineno)
    return "".join(lines)


_INDUCTOR = "backend='inductor'"
_ALONE = "backend=inductor_alone"
_INDUCTOR_ALONE = '''def inductor_alone(gm, example_inputs):
    """Inductor on the {what} as AOTAutograd hands it over, with no AOTAutograd in between."""
    {graph}with torch._guards.tracing(None):  # outside Dynamo's trace, as the aten graph reaches Inductor
        compiled = compile_fx_inner({name}, list(example_inputs){backward})
    return lambda *args: compiled(list(args))
'''


def inductor_alone(text: str, aten: bool = False, backward: bool = False) -> str | None:
    """An aten-level short form (or its test) whose graph Inductor compiles alone, as AOTAutograd hands a graph
    over (`compile_fx_inner`: private, where the bug lives), not after AOTAutograd traced it again, which may take
    another path; still through `torch.compile` (a backend), so compilation off still turns it off. With `aten`
    (fn calls aten ops: an after-AOT graph) Inductor compiles Dynamo's graph as written, which is the aten graph;
    else `make_fx` records it first. Tracing again may change it: `make_fx` runs each op, so a product with a
    ZeroTensor becomes a ZeroTensor and a composite op its decomposition. With `backward` (fn is a backward graph:
    saved activations and tangents in, gradients out) Inductor compiles it as one, as AOTAutograd's `bw_compiler`
    does. None when `text` does not compile with Inductor, or calls each side through `grads` (its backward
    compiled too: a graph Inductor compiles alone has none)."""
    if f"torch.compile(fn, {_INDUCTOR}, fullgraph=True)" not in text or GRADS.splitlines()[0] in text:
        return None  # not Inductor's; or its backward is wanted too, which a graph compiled alone has not
    tree = ast.parse(text)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "fn")
    lines = text.splitlines(keepends=True)
    made = "" if aten else "graph = make_fx(gm)(*example_inputs)\n    "
    what = "backward graph" if backward else "aten graph"
    lines.insert(fn.lineno - 1, _INDUCTOR_ALONE.format(what=what, graph=made, name="gm" if aten else "graph",
                                                       backward=", is_backward=True" if backward else "") + "\n\n")
    text = "".join(lines).replace(f"torch.compile(fn, {_INDUCTOR}, fullgraph=True)",
                                  f"torch.compile(fn, {_ALONE}, fullgraph=True)")
    text = text.replace("\nimport torch\n", "\nimport torch\nfrom torch._inductor.compile_fx import compile_fx_inner\n"
                        + ("" if aten else "from torch.fx.experimental.proxy_tensor import make_fx\n"), 1)
    said = ("the backward graph as AOTAutograd hands it over: saved activations and tangents in, gradients out"
            if backward else "the aten graph, as AOTAutograd hands it over")
    present = " while the bug is present"
    return text.replace(f"{present}.\n", f"{present} (Inductor alone compiles {said}).\n", 1)


def _aten_name(func: ast.expr) -> str | None:
    """NAME of `torch.ops.aten.NAME.OVERLOAD`."""
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    parts.reverse()
    return parts[3] if len(parts) == 5 and parts[:3] == ["torch", "ops", "aten"] else None

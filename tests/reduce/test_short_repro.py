"""repro.py and test_repro.py in PyTorch's own idiom (`reduce.short_repro`): pure renderings of the minimal
case, golden-tested, and None wherever only the harness form can say what the failure needs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from pt2doctor.model.minify import BackendKind, BackendSpec, ScalarSpec, Stage, TensorSpec
from pt2doctor.reduce.repro import ReproScript
from pt2doctor.reduce.short_repro import MISMATCH, at_torch_level, inductor_alone, render_short, render_test

SCRIPT = ReproScript(
    stage=Stage.AOT,
    forward_code="def forward(self, cos_default, k):\n"
                 "    relu_default = torch.ops.aten.relu.default(cos_default);  cos_default = None\n"
                 "    mul = torch.ops.aten.mul.Tensor(relu_default, k);  relu_default = None\n"
                 "    return (mul,)\n",
    inputs=(TensorSpec((2, 3), (3, 1), "float32", "cpu"), ScalarSpec(2)),
    config_lines=("import torch._inductor.config",
                  "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'compile_error'"),
    header=("Recorded graph g0001 (aot, compile id 0/0); torch 2.13.0+cpu.",),
)

SHORT = '''\
"""Recorded graph g0001 (aot, compile id 0/0); torch 2.13.0+cpu.
`python repro.py` raises while the bug is present.
"""
import torch
import torch._inductor.config

torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'compile_error'


def fn(cos_default, k):
    relu_default = torch.ops.aten.relu.default(cos_default)
    mul = torch.ops.aten.mul.Tensor(relu_default, k)
    return (mul,)


torch.manual_seed(0)
args = [torch.randn((2, 3)), 2]
expected = fn(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
actual = torch.compile(fn, backend='inductor', fullgraph=True)(*args)
torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: 'compiled differs from eager\\n' + m)
'''


def test_the_short_form_is_plain_torch_in_one_screen():
    assert render_short(SCRIPT) == SHORT


def test_the_regression_test_is_the_same_check_as_a_testcase():
    test = render_test(SCRIPT)
    assert test is not None and "class TestRepro(TestCase):" in test and test.rstrip().endswith("run_tests()")
    assert "        self.assertEqual(actual, expected)" in test and "def fn(cos_default, k):" in test
    compile(test, "test_repro.py", "exec")


def test_strided_integer_and_saved_inputs_are_made_with_public_calls():
    script = replace(SCRIPT, inputs=(TensorSpec((2, 2), (1, 2), "int64", "cpu", bounds=(0, 9)),
                                     TensorSpec((4,), (1,), "float16", "cpu", saved="input:1")))
    text = render_short(script)
    assert text is not None
    assert "args = [(torch.randint(0, 10, (4,))).as_strided((2, 2), (1, 2), 0), saved['input:1']]" in text
    assert 'torch.load(Path(__file__).with_name("repro_inputs.pt")' in text


@pytest.mark.parametrize("change", [
    {"backward": True, "backend": BackendSpec(BackendKind.NAMED, "aot_eager")},  # its own bw_compiler
    {"stage": Stage.AOTI},
    {"backend": BackendSpec(BackendKind.STUB, "my_backend", "RuntimeError: no source")},
    {"inputs": (TensorSpec((2, 3), (3, 1), "float32", "cpu", storage=0, requires_grad=True),
                TensorSpec((3,), (1,), "float32", "cpu", storage=0, requires_grad=True))},
    {"forward_code": textwrap.dedent("""\
        def forward(self, x, k):
            _set_fwd_grad_enabled = torch._C._set_fwd_grad_enabled(False);  _set_fwd_grad_enabled = None
            return (x * k,)
        """)},
    {"forward_code": textwrap.dedent("""\
        def forward(self, x):
            w = self.weight
            return (x * w,)
        """)},
])
def test_what_only_the_harness_can_say_has_no_short_form(change):
    script = replace(SCRIPT, **change)
    assert render_short(script) is None and render_test(script) is None


def test_a_backend_defined_in_the_script_is_written_as_the_recording_took_it_its_imports_with_the_others():
    source = ("import torch\nfrom torch._inductor.compile_fx import compile_fx\n\n\ndef my_backend(gm, inputs):\n"
              "    return compile_fx(gm, inputs)\n")
    script = replace(SCRIPT, backend=BackendSpec(BackendKind.SOURCE, "my_backend", source))
    text, test = render_short(script), render_test(script)
    assert text is not None and test is not None
    assert text.count("import torch\n") == 1
    assert "import torch._inductor.config\nfrom torch._inductor.compile_fx" in text
    assert "\n\n\ndef my_backend(gm, inputs):\n    return compile_fx(gm, inputs)\n\n\ndef fn(" in text
    assert "actual = torch.compile(fn, backend=my_backend, fullgraph=True)(*args)" in text
    assert "def my_backend(gm, inputs):" in test and "backend=my_backend" in test
    compile(text, "repro.py", "exec")
    compile(test, "test_repro.py", "exec")


def test_a_graph_of_factory_ops_on_no_input_has_a_short_form():
    """Ops on no input are recorded for FX's symbolic trace (the harness form); Dynamo traces them as they are."""
    script = replace(SCRIPT, inputs=(), prelude=("device = torch.device",), config_lines=(), forward_code=(
        "def forward(self):\n"
        "    iota = torch.ops.prims.iota.default(9, start = 0, step = 1, dtype = torch.int64, "
        "device = device(type='cpu'), requires_grad = False)\n"
        "    return (iota,)\n"))
    text = render_short(script)
    assert text is not None and "device" not in text.split("def fn():")[0] and "device='cpu'" in text
    assert "expected = fn()\nactual = torch.compile(fn, backend='inductor', fullgraph=True)()" in text
    assert "manual_seed" not in text and "args" not in text  # nothing random, nothing to pass
    namespace: dict = {}
    exec(compile(text, "repro.py", "exec"), namespace)  # it runs (the graph is no bug): the device literal is valid


def test_a_size_that_was_symbolic_is_marked_dynamic():
    script = replace(SCRIPT, inputs=(TensorSpec((2, 1), (1, 1), "bool", "cpu", dynamic=(0,)), ScalarSpec(2)))
    text = render_short(script)
    assert (text is not None and "torch._dynamo.mark_dynamic(args[0], 0)" in text
            and "args = [torch.rand((2, 1)) > 0.5, 2]" in text)


def test_aten_ops_with_a_public_torch_function_are_written_as_it_and_nothing_else_changes():
    text = render_short(replace(SCRIPT, config_lines=(), forward_code=(
        "def forward(self, x, k):\n"
        "    iota = torch.ops.prims.iota.default(4, start = 0, step = 1, dtype = torch.int64, "
        "device = device(type='cpu'), requires_grad = False)\n"
        "    cumsum = torch.ops.aten.cumsum.default(x, 1, dtype = torch.bfloat16)\n"
        "    mul = torch.ops.aten.mul.Tensor(cumsum, k)\n"
        "    view = torch.ops.aten.view.default(mul, [6])\n"
        "    return (view, iota)\n")))
    assert text is not None
    torch_level = at_torch_level(text)
    assert torch_level is not None
    assert "torch.cumsum(x, 1, dtype=torch.bfloat16)" in torch_level and "torch.mul(cumsum, k)" in torch_level
    assert "torch.ops.aten.view.default(mul, [6])" in torch_level  # no torch.view: stays aten
    assert "torch.ops.prims.iota.default(" in torch_level  # prims stay
    untouched = [line for line in text.splitlines() if "torch.ops.aten" not in line]
    assert [line for line in torch_level.splitlines() if "torch.cumsum" not in line and "torch.mul" not in line
            and "torch.ops.aten" not in line] == untouched
    assert at_torch_level(torch_level.replace("torch.ops.aten.view.default",
                                              "torch.ops.aten._unsafe_view.default")) is None
    namespace: dict = {}
    exec(compile(torch_level.replace("backend='inductor'", "backend='eager'"), "repro.py", "exec"), namespace)


def _run(text: str, backend: str | None = None) -> dict:
    """`text` run as a script in this process, its backend replaced by `backend` where given: its globals."""
    if backend is not None:
        text = text.replace("backend='inductor'", f"backend={backend!r}").replace("backend='aot_eager'",
                                                                                  f"backend={backend!r}")
    namespace: dict = {"__name__": "__main__"}
    exec(compile(text, "repro.py", "exec"), namespace)
    return namespace


VIEWS = replace(SCRIPT, stage=Stage.DYNAMO, backend=BackendSpec(BackendKind.NAMED, "aot_eager"), config_lines=(),
                forward_code="def forward(self, l_t0_, l_ta_):\n"
                             "    add_ = l_t0_.add_(100);  l_t0_ = add_ = None\n"
                             "    getitem = l_ta_[0];  l_ta_ = None\n"
                             "    return (getitem,)\n",
                inputs=(TensorSpec((4, 3), (3, 1), storage=0), TensorSpec((1, 3), (3, 1), offset=6, storage=0)))


def test_inputs_that_are_views_of_one_tensor_are_made_again_for_each_call():
    """pytorch#198095: AOTAutograd replays an output that is a view of a mutated input's alias on the wrong base.
    Cloning each input for eager would make them two tensors, and the compiled call's views of a tensor eager
    already mutated: each call gets its own tensor and views of it."""
    text = render_short(VIEWS)
    assert text is not None and render_test(VIEWS) is not None
    assert ("def make_args():  # views of one tensor, as the program passed them\n    torch.manual_seed(0)\n"
            "    base0 = torch.randn((4, 3))\n"
            "    args = [base0, base0.as_strided((1, 3), (3, 1), 6)]\n    return args\n") in text
    assert ("expected = fn(*make_args())\n"
            "actual = torch.compile(fn, backend='aot_eager', fullgraph=True)(*make_args())") in text
    _run(text, "eager")  # the views are right: eager against itself agrees
    with pytest.raises(AssertionError, match=MISMATCH.strip()):
        _run(text)  # AOTAutograd's synthetic base (the bug, on torch 2.13)


def test_a_storage_no_input_covers_is_one_flat_tensor_the_inputs_view():
    script = replace(VIEWS, inputs=(TensorSpec((2,), (2,), storage=0), TensorSpec((2,), (2,), offset=1, storage=0)))
    text = render_short(script)
    assert text is not None and "    base0 = torch.randn((4,))\n" in text
    assert "args = [base0.as_strided((2,), (2,), 0), base0.as_strided((2,), (2,), 1)]" in text
    _run(text, "eager")


def test_a_zero_tensor_input_is_made_as_one():
    script = replace(SCRIPT, config_lines=(), inputs=(TensorSpec((2, 3), (3, 1), zero=True), ScalarSpec(2)))
    text = render_short(script)
    assert text is not None and "args = [torch._efficientzerotensor((2, 3), dtype=torch.float32), 2]" in text
    namespace = _run(text, "eager")
    assert namespace["args"][0]._is_zerotensor() and namespace["actual"][0].shape == (2, 3)


DRAWS = replace(SCRIPT, stage=Stage.DYNAMO, config_lines=(),
                forward_code="def forward(self, loc, scale):\n"
                             "    normal = torch.normal(loc, scale)\n"
                             "    return (normal,)\n",
                inputs=(TensorSpec((8,), (1,), "float16"), TensorSpec((8,), (1,), saved="input:1")))


def test_a_graph_that_draws_compares_what_a_draw_cannot_change(tmp_path):
    """pytorch#194547: `torch.normal`'s decomposition returns float32 where eager keeps the mean's float16. The
    values cannot be compared (compiled code draws its own numbers), the dtype and shape can; `torch.normal` is
    a public function `__torch_function__` does not see, which Dynamo traces as it is."""
    import torch

    torch.save({"input:1": torch.ones(8)}, tmp_path / "repro_inputs.pt")
    text = render_short(DRAWS, draws=True)
    test = render_test(DRAWS, draws=True)
    assert text is not None and test is not None and "assert_close" not in text
    compare = "actual, expected = [[(t.dtype, t.shape) for t in out] for out in (actual, expected)]\n"
    assert compare + "assert actual == expected, " in text
    assert "        " + compare + "        self.assertEqual(actual, expected)" in test
    (tmp_path / "repro.py").write_text(text.replace("backend='inductor'", "backend='eager'"))
    assert _script(tmp_path / "repro.py").returncode == 0  # eager draws again, differently: no mismatch
    (tmp_path / "repro.py").write_text(text.replace("backend='inductor'", "backend='aot_eager_decomp_partition'"))
    failed = _script(tmp_path / "repro.py")
    assert failed.returncode == 1 and "(torch.float32, torch.Size([8]))] != [(torch.float16" in failed.stderr


def _script(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=path.parent)


@pytest.mark.slow
def test_inductor_alone_compiles_an_aten_graph_as_written(tmp_path):
    """pytorch#190856: Inductor's kernel for a product with `_efficientzerotensor` segfaults. `make_fx` would run
    the ops first (a ZeroTensor's product is a ZeroTensor: no product left to compile); the after-AOT graph is
    compiled as written."""
    script = replace(SCRIPT, config_lines=(), inputs=(TensorSpec((1, 1, 1), (1, 1, 1)),), forward_code=(
        "def forward(self, view):\n"
        "    zeros = torch.ops.aten._efficientzerotensor.default([3, 3], dtype = torch.float32, "
        "layout = torch.strided, device = device(type='cpu'))\n"
        "    mul = torch.ops.aten.mul.Tensor(view, zeros)\n"
        "    return (mul,)\n"))
    text = render_short(script)
    assert text is not None
    alone, traced = inductor_alone(text, aten=True), inductor_alone(text)
    assert alone is not None and traced is not None and "make_fx" not in alone and "make_fx(gm)" in traced
    assert "compiled = compile_fx_inner(gm, list(example_inputs))" in alone
    (tmp_path / "repro.py").write_text(alone)
    assert _script(tmp_path / "repro.py").returncode == -11  # SIGSEGV (the bug, on torch 2.13)
    (tmp_path / "repro.py").write_text(traced)
    assert _script(tmp_path / "repro.py").returncode == 0


def test_a_backward_graph_is_compiled_by_inductor_alone_as_a_backward_graph():
    """What AOTAutograd hands `bw_compiler` is compiled as it was (`is_backward=True`), not traced again as a
    forward graph."""
    script = replace(SCRIPT, backward=True, config_lines=())
    text, test = render_short(script), render_test(script)
    assert text is not None and test is not None
    for written in (text, test):
        assert "compiled = compile_fx_inner(gm, list(example_inputs), is_backward=True)" in written
        assert "torch.compile(fn, backend=inductor_alone, fullgraph=True)" in written and "make_fx" not in written
    assert "(Inductor alone compiles the backward graph as AOTAutograd hands it over" in text
    assert at_torch_level(text) is None  # compiled as written: in aten ops
    compile(text, "repro.py", "exec")


@pytest.mark.slow  # two C++ compiles
def test_a_backward_graphs_short_form_shows_its_bug_and_passes_without_it(tmp_path):
    script = replace(SCRIPT, backward=True, config_lines=(
        "import torch._inductor.config", "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'"))
    text = render_short(script)
    assert text is not None
    (tmp_path / "repro.py").write_text(text)
    failed = _script(tmp_path / "repro.py")
    assert failed.returncode == 1 and MISMATCH.strip() in failed.stderr, failed.stderr[-2000:]
    (tmp_path / "repro.py").write_text(text.replace("'accuracy'", "None"))
    assert _script(tmp_path / "repro.py").returncode == 0


def test_many_saved_inputs_are_made_by_their_names():
    names = [f"arg{i}" for i in range(7)]  # `args = [saved['arg0'], ...]` would not fit a line
    script = replace(SCRIPT, backward=True, config_lines=(), inputs=tuple(
        TensorSpec((2, 3), (3, 1), "float32", "cpu", saved=name) for name in names), forward_code=(
        "def forward(self, a, b, c, d, e, f, g):\n"
        "    return (torch.ops.aten.relu.default(a + b + c + d + e + f + g),)\n"))
    text = render_short(script)
    assert text is not None and f"names = {names!r}\nargs = [saved[name] for name in names]\n" in text


def test_inputs_too_long_for_one_line_continue_under_the_first_with_default_dtypes_left_out():
    """A maintainer's layout (pytorch#186241's RMSNorm backward had its repro at 43 lines with an input a line)."""
    big = TensorSpec((50000, 128), (128, 1), "float32", "cuda:0", requires_grad=True)
    half = TensorSpec((128,), (1,), "float16", "cuda:0", requires_grad=True)
    text = render_short(replace(SCRIPT, inputs=(big, half, ScalarSpec(2))))
    packed = ("args = [torch.randn((50000, 128), device='cuda:0').requires_grad_(),\n"
              "        torch.randn((128,), dtype=torch.float16, device='cuda:0').requires_grad_(), 2]\n")
    assert text is not None and packed in text

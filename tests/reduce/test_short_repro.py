"""repro.py and test_repro.py in PyTorch's own idiom (`reduce.short_repro`): pure renderings of the minimal
case, golden-tested, and None wherever only the harness form can say what the failure needs."""

from __future__ import annotations

import textwrap
from dataclasses import replace

import pytest

from pt2doctor.model.minify import BackendKind, BackendSpec, ScalarSpec, Stage, TensorSpec
from pt2doctor.reduce.repro import ReproScript
from pt2doctor.reduce.short_repro import at_torch_level, render_short, render_test

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
args = [torch.randn((2, 3), dtype=torch.float32), 2]
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
    assert "(torch.randint(0, 10, (4,), dtype=torch.int64)).as_strided((2, 2), (1, 2), 0)," in text
    assert "saved['input:1']," in text and 'torch.load(Path(__file__).with_name("repro_inputs.pt")' in text


@pytest.mark.parametrize("change", [
    {"backward": True},
    {"stage": Stage.AOTI},
    {"backend": BackendSpec(BackendKind.SOURCE, "my_backend", "def my_backend(gm, inputs): ...")},
    {"inputs": (TensorSpec((2, 3), (3, 1), "float32", "cpu", storage=0), ScalarSpec(2))},
    {"forward_code": textwrap.dedent("""\
        def forward(self, x):
            w = self.weight
            return (x * w,)
        """)},
])
def test_what_only_the_harness_can_say_has_no_short_form(change):
    script = replace(SCRIPT, **change)
    assert render_short(script) is None and render_test(script) is None


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

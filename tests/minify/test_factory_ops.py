"""An op that no input feeds (a factory: `aten.bartlett_window`, `aten.arange`, `aten.eye`) stays a node of
the loaded graph and of the repro's graph. `symbolic_trace` runs such an op and keeps its result as a
constant, so a lowering bug in it vanished ("the graph does not fail in isolation")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch
import torch.fx

from pt2doctor.capture.torch_compat import graph_module, torch_ops_called
from pt2doctor.model.minify import Stage, TensorSpec
from pt2doctor.reduce.repro import ReproScript, ops_to_record, render

FORWARD = """\
def forward(self, x):
    bartlett_window = torch.ops.aten.bartlett_window.default(16, dtype=torch.float32, device=torch.device("cpu"), pin_memory=False)
    sub = torch.ops.aten.sub.Tensor(bartlett_window, 0.5)
    relu = torch.ops.aten.relu.default(sub)
    add = torch.ops.aten.add.Tensor(x, relu)
    return (add,)
"""  # noqa: E501 (the graph's code as torch prints it)


def _module() -> torch.nn.Module:
    namespace: dict = {"torch": torch}
    exec(FORWARD, namespace)
    return type("Recorded", (torch.nn.Module,), {"forward": namespace["forward"]})()


def _targets(gm: torch.fx.GraphModule) -> list[str]:
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def test_the_loaded_graph_keeps_every_op() -> None:
    assert "aten.bartlett_window.default" not in _targets(torch.fx.symbolic_trace(_module()))  # why
    gm = graph_module(_module(), torch_ops_called(FORWARD))
    assert _targets(gm) == ["aten.bartlett_window.default", "aten.sub.Tensor", "aten.relu.default",
                            "aten.add.Tensor"]
    assert torch.equal(gm(torch.zeros(16))[0], _module()(torch.zeros(16))[0])


def test_only_the_roots_of_input_independent_code_are_recorded() -> None:
    assert ops_to_record(FORWARD) == ("aten.bartlett_window.default",)
    assert ops_to_record("def forward(self, x):\n    sin = torch.ops.aten.sin.default(x)\n    return (sin,)\n") == ()


def test_an_after_aot_repro_fails_on_an_op_fed_only_by_a_factory(tmp_path: Path) -> None:
    script = ReproScript(Stage.AOT, FORWARD, (TensorSpec((16,), (1,)),), config_lines=(
        "import torch._inductor.config",
        "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'compile_error'"))
    text = render(script)
    assert "TORCH_OPS = ('aten.bartlett_window.default',)" in text
    (tmp_path / "repro.py").write_text(text)
    proc = subprocess.run([sys.executable, str(tmp_path / "repro.py")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1 and "PT2DOCTOR REPRO FAILED: " in proc.stderr, proc.stderr[-2000:]
    assert "CppCompileError" in proc.stderr or "InductorError" in proc.stderr

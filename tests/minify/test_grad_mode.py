"""A graph the program compiled under `torch.no_grad()` is minified and handed over under it: the recorder keeps the
grad mode of each Dynamo graph, and the repro (both forms) runs the graph so. Real Dynamo, with a backend of the
script's that fails on inference graphs alone: a repro run with grad enabled would not fail."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

from pt2doctor.model.minify import BackendKind, BackendSpec, Stage, TensorSpec
from pt2doctor.reduce.repro import NO_GRAD_NOTE, ReproScript, render
from pt2doctor.reduce.short_repro import render_short, render_test

INFERENCE_ONLY_FAILS = """
    import torch

    def training_only_backend(gm, example_inputs):  # a backend with no kernels for inference graphs
        if not torch.is_grad_enabled():
            raise NotImplementedError("training_only_backend has no inference kernels")
        return gm.forward

    @torch.compile(backend=training_only_backend)
    def f(x, w):
        return torch.tanh(torch.sin(x) @ w).sum(1)

    x, w = torch.randn(4, 8), torch.randn(8, 8, requires_grad=True)
    f(x, w).sum().backward()  # trains fine
    with torch.no_grad():
        f(x, w)  # evaluating fails
"""


def test_a_graph_compiled_under_no_grad_is_minified_and_reproduced_under_it(recorded, minified):
    run_dir = recorded(INFERENCE_ONLY_FAILS)
    graphs = [json.loads(line) for line in (run_dir / "graphs" / "index.jsonl").read_text().splitlines()]
    assert [g["grad_enabled"] for g in graphs if g["stage"] == "dynamo"] == [True, False]
    run, result = minified(run_dir)
    assert run.code == 0, run.stderr[-2000:]
    assert result["verified"], result
    repro = (run_dir / "repro.py").read_text()
    assert "torch.set_grad_enabled(False)" in repro and NO_GRAD_NOTE in repro
    ran = subprocess.run([sys.executable, str(run_dir / "repro.py")], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 1 and "training_only_backend has no inference kernels" in ran.stderr, ran.stderr[-2000:]


SCRIPT = ReproScript(
    stage=Stage.DYNAMO,
    forward_code="def forward(self, x, w):\n    mm = torch.mm(x, w);  x = w = None\n    return (mm,)\n",
    inputs=(TensorSpec((2, 3), (3, 1), "float32", "cpu"), TensorSpec((3, 3), (3, 1), "float32", "cpu",
                                                                    requires_grad=True)),
    backend=BackendSpec(BackendKind.NAMED, "eager"),
    grad_enabled=False,
)


def test_both_short_forms_make_their_calls_under_no_grad_and_the_inputs_before():
    short, test = render_short(SCRIPT), render_test(SCRIPT)
    assert short is not None and test is not None
    assert ("args = [torch.randn((2, 3)), torch.randn((3, 3)).requires_grad_()]\n"
            "with torch.no_grad():  # as the program compiled it\n"
            "    expected = fn(") in short
    assert "        with torch.no_grad():  # as the program compiled it\n            expected = fn(" in test
    exec(compile(short, "repro.py", "exec"), {"__name__": "repro"})  # it runs, and passes: eager is right


def test_a_graph_compiled_with_grad_or_after_aot_renders_as_before():
    assert "set_grad_enabled(False)" in render(SCRIPT)
    assert "set_grad_enabled" not in render(replace(SCRIPT, grad_enabled=True))
    assert "set_grad_enabled" not in render(replace(SCRIPT, stage=Stage.AOT))  # its inputs require no grad
    assert "no_grad" not in (render_short(replace(SCRIPT, grad_enabled=True)) or "")

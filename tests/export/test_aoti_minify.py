"""Minifying an AOTInductor failure from the exported program a recorded run keeps (`reduce.aoti_minify`), on
real torch.export + AOTInductor runs of a small MLP with Inductor's planted ReLU bug: every query exports a
candidate again and compiles, loads and calls its package in a forked worker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pt2doctor.export.capture.record import ExportRecorder
from pt2doctor.model.export import RECORDING_DIR, ExportStep
from pt2doctor.model.minify import Stage, TensorSpec
from pt2doctor.reduce.aoti_minify import minify_program
from pt2doctor.reduce.fx_minify import MinifyOptions
from pt2doctor.reduce.repro import ReproScript, render


class _Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x))).sigmoid()


def _record(tmp_path: Path, bug: str, called: bool) -> Path:
    """What the diagnose child keeps of a script that exports the MLP and AOT-compiles it with `bug` planted."""
    torch.manual_seed(0)
    x, recorder = torch.randn(3, 8), ExportRecorder(str(tmp_path / "run"))
    ep = torch.export.export(_Mlp(), (x,))
    with torch._inductor.config.patch({"cpp.inject_relu_bug_TESTING_ONLY": bug}):
        recorder.before(ExportStep.AOTI_COMPILE, (ep,), {})
    if called:
        recorder.before(ExportStep.AOTI_RUN, (None, x), {})
    return tmp_path / "run" / RECORDING_DIR


def test_an_aoti_repro_exports_its_module_and_deploys_it_with_the_recorded_configs() -> None:
    relu = "def forward(self, x):\n    relu = torch.ops.aten.relu.default(x);  x = None\n    return (relu,)\n"
    text = render(ReproScript(Stage.AOTI, relu, (TensorSpec((4,), (1,)),), inductor_configs="{'max_autotune': False}"))
    assert "INDUCTOR_CONFIGS = {'max_autotune': False}" in text
    assert "torch.export.export(mod, tuple(args), strict=False)" in text
    assert "aoti_compile_and_package(" in text and "torch._inductor.aoti_load_package(path)" in text
    assert "compile_fx_inner" not in text and "torch.compile(" not in text


@pytest.mark.slow
@pytest.mark.parametrize(("bug", "called", "accuracy"), [
    ("runtime_error", True, False),  # the package raises when called: every query runs its candidate's package
    ("accuracy", True, True),  # the package computes otherwise: the real weights and inputs, saved beside the repro
])
def test_a_planted_aoti_bug_is_minified_to_the_relu_with_aotinductor_as_the_oracle(
        tmp_path: Path, bug: str, called: bool, accuracy: bool) -> None:
    kept = _record(tmp_path, bug, called)
    out = tmp_path / "out"
    result = minify_program(kept, MinifyOptions(out, jobs=2, timeout_s=300), accuracy=accuracy).result
    assert (result.stage, result.nodes_before) == (Stage.AOTI, 4)
    assert (result.ops, result.culprit_ops, result.verified) == (("aten.relu.default",), ("aten.relu.default",), True)
    repro = out / "repro.py"
    text = repro.read_text()
    assert f"torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = {bug!r}" in text
    assert (out / "repro_inputs.pt").exists() is accuracy
    # standalone: plain torch, in a fresh interpreter, from another directory
    proc = subprocess.run([sys.executable, str(repro)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1 and "PT2DOCTOR REPRO FAILED" in proc.stderr
    assert "pt2doctor" not in "".join(line for line in text.splitlines() if line.startswith(("import", "from")))

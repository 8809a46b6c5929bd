"""End to end with real torch: PyTorch's own planted minifier bugs each end at the single relu.

Each test runs the whole product path: isolated warm workers, reduction, repro.py written and
verified in a fresh interpreter.
"""

from __future__ import annotations

import pytest
from graphs import CHAIN_INPUTS, aten_chain, torch_chain

from pt2doctor.reduce.api import minify

INDUCTOR = "import torch._inductor.config"


@pytest.mark.parametrize("backend", [
    "relu_compile_error_TESTING_ONLY", "relu_runtime_error_TESTING_ONLY", "relu_accuracy_error_TESTING_ONLY",
])
def test_dynamo_testing_backends_end_at_torch_relu(backend, tmp_path):
    accuracy = "accuracy" in backend
    outcome = minify(torch_chain(12), CHAIN_INPUTS, backend, accuracy=accuracy, out_dir=tmp_path, jobs=2)
    assert outcome.result.ops == ("torch.relu",)
    assert outcome.result.verified
    assert (tmp_path / "minify.json").exists()
    assert "pt2doctor" not in "".join(line for line in outcome.repro_text.splitlines()
                                      if line.startswith(("import", "from")))


@pytest.mark.parametrize("bug", [
    "compile_error",
    pytest.param("runtime_error", marks=pytest.mark.slow),
    pytest.param("accuracy", marks=pytest.mark.slow),
])
def test_inductor_planted_bug_ends_at_aten_relu(bug, tmp_path):
    config = (INDUCTOR, f"torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = {bug!r}")
    outcome = minify(aten_chain(20), CHAIN_INPUTS, "inductor", accuracy=bug == "accuracy",
                     config_lines=config, out_dir=tmp_path, jobs=2)
    assert outcome.result.ops == ("aten.relu.default",)
    assert outcome.result.verified
    assert outcome.result.minimal

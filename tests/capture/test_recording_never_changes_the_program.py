"""Real torch.compile and torch.export under the graph recorder (`capture.child.graph_recorder.install`, with the
accuracy check `diagnose`'s first run has): what the program computes and raises is what it would without
pt2doctor (two corpus bugs had their outcome changed by the recording: a graph of NumPy calls the recorder
could not write, a `torch.cond` branch judged on export's fake tensors)."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pytest
import torch

from pt2doctor.capture.child import graph_recorder
from pt2doctor.model.recording import read_index, read_unrecorded


@pytest.fixture
def recording(tmp_path: Path):
    uninstall = graph_recorder.install(tmp_path, accuracy_tolerance=1e-3, every_aot_graph=True)
    torch._dynamo.reset()
    try:
        yield tmp_path / "graphs"
    finally:
        uninstall()
        torch._dynamo.reset()


def cumsum(a: np.ndarray) -> np.ndarray:
    return np.cumsum(a) * 2 + np.abs(a).sum()


def test_a_graph_of_numpy_calls_is_recorded_and_computes_what_it_would(recording: Path) -> None:
    a = np.array([-128, -100, -3, 0, 5, 100, 127], dtype=np.int8)
    recorded = torch.compile(cumsum, backend="eager")(a)

    (entry,) = read_index(recording)
    source = (recording / f"{entry.id}.py").read_text()
    assert "numpy_to_tensor_wrapper(torch._numpy.cumsum)" in source
    assert "numpy_operator_wrapper(operator.mul)" in source
    assert "numpy_method_wrapper('sum')" in source
    graph: dict = {}
    exec(source, graph)  # the recorded graph is code that runs: replayable like any other
    replayed = graph["forward"](None, torch.from_numpy(a))[0]
    torch._dynamo.reset()
    plain = torch.compile(cumsum, backend="eager")(a)
    assert np.array_equal(recorded, plain) and recorded.dtype == plain.dtype
    assert np.array_equal(replayed.numpy(), plain)


class Cond(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda x: x.sin() * 2, lambda x: x.cos() + 1, (x,))


def test_a_cond_branch_traced_by_export_is_not_judged_on_fake_tensors(recording: Path) -> None:
    x = torch.randn(4)
    program = torch.export.export(Cond(), (x,))

    assert torch.allclose(program.module()(x), Cond()(x))
    assert not (recording / "failures.jsonl").read_text().strip()


def test_the_corpus_bug_under_recording_raises_what_it_raises_without(recording: Path) -> None:
    script = Path(__file__).parents[1] / "realbugs" / "export_cond_branch_tensor_decomp.py"
    with pytest.raises(RuntimeError, match="FunctionalTensor on its own"):
        runpy.run_path(str(script))


def test_a_graph_the_recorder_cannot_write_is_compiled_unrecorded_and_said(recording: Path, monkeypatch) -> None:
    def disk_full(gm: object) -> str:
        raise OSError("No space left on device")

    monkeypatch.setattr(graph_recorder.torch_compat, "fx_module_source", disk_full)
    x = torch.randn(8)
    assert torch.equal(torch.compile(lambda t: t.sin() * 2, backend="eager")(x), x.sin() * 2)
    assert read_index(recording) == []
    (unrecorded,) = read_unrecorded(recording)
    assert unrecorded.compile_id == "0/0" and unrecorded.description == "OSError: No space left on device"

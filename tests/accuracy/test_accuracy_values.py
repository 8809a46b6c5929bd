"""End to end: `pt2doctor accuracy` minifies with the input values the run saw, not random ones.

`large_values.py`'s backend computes a wrong result only on a float input above 50 together with an
index above zero, values random stand-ins never have. The probe hands the recorder the inputs of
the graph it judged wrong, and the accuracy command's minifier loads them as `minify RUN_DIR` does
(`reduce.fx_load.load_compile`), so the repro reads them from `repro_inputs.pt`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pt2doctor.capture.input_values import load_values
from pt2doctor.reduce.fx_load import NothingToMinify, load_compile, load_failing

X = torch.linspace(-100.0, 100.0, 24).reshape(6, 4)  # as in large_values.py
IDX = torch.tensor([3, 1, 0])


@pytest.fixture(scope="module")
def large_values(accuracy_run):
    run = accuracy_run("large_values.py", "--jobs", "2")
    assert run.code == 1, run.stderr[-3000:]
    return run


def _failures(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "graphs" / "failures.jsonl").read_text().splitlines()]


def _run_repro(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "repro.py"], cwd=directory, capture_output=True, text=True, timeout=300)


def test_a_bug_on_the_real_values_is_minified_to_a_repro_that_reads_them(large_values, tmp_path):
    (graph,) = large_values.doc["accuracy"]
    minified = graph["minified"]
    assert graph["verdict"] == "fail" and minified.get("error") is None, minified
    assert minified["verified"] and minified["nodes_after"] == 1
    repro = Path(minified["repro"])
    assert repro.parent == large_values.out_dir / "minify-0-0"
    assert "saved_input('arg0', 'cpu')" in repro.read_text()
    saved = torch.load(repro.parent / "repro_inputs.pt", weights_only=True)
    assert sorted(saved) == ["arg0", "arg1"]
    assert torch.equal(saved["arg0"], X) and torch.equal(saved["arg1"], IDX)
    rerun = _run_repro(repro.parent)
    assert rerun.returncode == 1 and "PT2DOCTOR REPRO FAILED: AccuracyMismatch" in rerun.stderr, rerun.stderr[-2000:]
    shutil.copy(repro, tmp_path)  # the same repro on random floats: the bug hides
    torch.save({**saved, "arg0": torch.randn(6, 4)}, tmp_path / "repro_inputs.pt")
    assert _run_repro(tmp_path).returncode == 0


def test_the_recorder_keeps_the_inputs_of_the_graph_the_probe_blamed(large_values):
    (failure,) = _failures(large_values.out_dir)
    assert (failure["graph"], failure["phase"], failure["tolerance"]) == ("g0000", "accuracy", 1e-4)
    values = load_values(large_values.out_dir / "graphs" / failure["values"])
    assert torch.equal(values[0], X) and torch.equal(values[1], IDX)


def test_load_compile_and_load_failing_pick_the_same_graph_with_its_values(large_values, tmp_path):
    by_id = load_compile(large_values.out_dir, "0/0", out_dir=tmp_path / "a")
    recorded = load_failing(large_values.out_dir, out_dir=tmp_path / "b")  # `minify RUN_DIR` on this run
    assert by_id.graph_id == recorded.graph_id == "g0000"
    assert by_id.context.accuracy and recorded.context.accuracy and by_id.expected is None
    assert [s.saved for s in by_id.case.inputs] == [s.saved for s in recorded.case.inputs] == ["arg0", "arg1"]
    assert all(not s.saved for s in load_compile(large_values.out_dir, "0/0").case.inputs)  # no out_dir: random
    with pytest.raises(NothingToMinify, match="compile id 9/9"):
        load_compile(large_values.out_dir, "9/9")


def test_a_graph_that_passes_keeps_no_float_values(accuracy_run):
    run = accuracy_run("relu_chain.py", "--backend", "aot_eager", "--no-minify")  # shared with test_accuracy_cli
    assert [g["verdict"] for g in run.doc["accuracy"]] == ["pass"]
    assert _failures(run.out_dir) == []
    assert list((run.out_dir / "graphs").glob("*.inputs.pt")) == []

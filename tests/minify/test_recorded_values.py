"""End to end, real torch.compile: `pt2doctor run --record` keeps input values where they matter,
and `pt2doctor minify RUN_DIR` writes them beside the repro (`repro_inputs.pt`), which fails the
same way in a fresh interpreter. Each user script's backend misbehaves only on values that seeded
random inputs (zeros for indices, randn for floats) never have.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import torch
from graphs import INDUCTOR_DYNAMIC_SCRIPT

from pt2doctor.model.minify import ScalarSpec, TensorSpec
from pt2doctor.model.recording import read_failures
from pt2doctor.reduce.fx_load import _aot_positions, load_failing

REALBUGS = Path(__file__).parents[1] / "realbugs"

# A gather, compiled by a backend that misbehaves only when an index is above zero.
GATHER = """
    import ctypes
    import torch


    def on_index(gm, example_inputs):
        def run(*args):
            if any(not a.is_floating_point() and bool((a > 0).any()) for a in args if isinstance(a, torch.Tensor)):
                MISBEHAVE
            return gm(*args)
        return run


    def f(x, idx):
        y = torch.sin(x) * 2
        return (torch.cos(y[idx]) + 1,)


    torch.compile(f, backend=on_index)(torch.randn(6, 4), torch.tensor([3, 1, 0]))
"""
WRONG_GATHER = GATHER.replace("MISBEHAVE", "return tuple(out + 1 for out in gm(*args))")
CRASHING_GATHER = GATHER.replace("MISBEHAVE", "ctypes.string_at(0)")

# A float graph that passes and an index tensor over the size cap keep no values; the graph that
# fails at run time keeps all its inputs.
LARGE_VALUES = """
    import torch


    def picky_values(gm, example_inputs):
        def run(*args):
            if any(isinstance(a, torch.Tensor) and a.is_floating_point() and bool((a.abs() > 50).any()) for a in args):
                raise ValueError("picky_values: a value above 50")
            return gm(*args)
        return run


    def f(x, y):
        return (torch.cos(x * 2) - y,)


    torch.compile(lambda x: (torch.sin(x) + 1,), backend=picky_values)(torch.randn(4))
    torch.compile(lambda big: (big + 1,), backend=picky_values)(torch.zeros(2_200_000, dtype=torch.int64))
    torch.compile(f, backend=picky_values)(torch.full((4, 4), 100.0), torch.randn(4, 4))
"""


# A backend whose cos is wrong only on an exact zero (a value random stand-ins never have): the zeros are
# made upstream (`... * 0`), so a cut before the cos must carry the value the graph computed, not a random one.
WRONG_ON_ZEROS = """
    import torch


    def wrong_on_zeros(gm, example_inputs):
        def run(*args):
            seen = []
            class Watch(torch.fx.Interpreter):
                def call_function(self, target, args, kwargs):
                    seen.append(target is torch.cos and bool((args[0] == 0).any()))
                    return super().call_function(target, args, kwargs)
            outs = Watch(gm).run(*args)
            return tuple(out + 1 for out in outs) if any(seen) else outs
        return run


    def f(x):
        zeros = torch.sin(x * 2) * 0
        return (torch.cos(zeros) + torch.tanh(x),)


    torch.compile(f, backend=wrong_on_zeros)(torch.randn(8))
"""


def _failures(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "graphs" / "failures.jsonl").read_text().splitlines()]


def _run_repro(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "repro.py"], cwd=directory, capture_output=True, text=True, timeout=300)


def test_index_values_reproduce_a_wrong_result(recorded, minified, tmp_path):
    run_dir = recorded(WRONG_GATHER, accuracy="1e-4")
    assert [(f["phase"], f["values"]) for f in _failures(run_dir)] == [("accuracy", "g0000.failed.inputs.pt")]
    run, result = minified(run_dir)
    assert run.code == 0, run.stderr[-2000:]
    assert (result["signature"]["kind"], result["verified"]) == ("accuracy", True)
    assert "saved_input('arg1', 'cpu')" in (run_dir / "repro.py").read_text()
    saved = torch.load(run_dir / "repro_inputs.pt", weights_only=True)
    assert torch.equal(saved["arg1"], torch.tensor([3, 1, 0]))
    assert "PT2DOCTOR REPRO FAILED: AccuracyMismatch" in _run_repro(run_dir).stderr
    shutil.copy(run_dir / "repro.py", tmp_path)  # the same repro on zero indices: the bug hides
    torch.save({**saved, "arg1": torch.zeros(3, dtype=torch.int64)}, tmp_path / "repro_inputs.pt")
    assert _run_repro(tmp_path).returncode == 0


def test_index_values_kept_when_recorded_reproduce_a_crash(recorded, minified):
    run_dir = recorded(CRASHING_GATHER)
    assert _failures(run_dir) == []  # the process died of SIGSEGV: only the values kept at recording remain
    run, result = minified(run_dir)
    assert run.code == 0, run.stderr[-2000:]
    assert (result["signature"]["text"], result["verified"]) == ("SIGSEGV", True)
    assert "saved_input('arg1', 'cpu')" in (run_dir / "repro.py").read_text()
    assert _run_repro(run_dir).returncode == -11


def test_inputs_of_a_graph_failing_at_run_time_are_kept(recorded, minified):
    run_dir = recorded(LARGE_VALUES)
    graphs = run_dir / "graphs"
    assert [json.loads(line)["values"] for line in (graphs / "index.jsonl").read_text().splitlines()] == [None] * 3
    assert [(f["graph"], f["phase"], f["values"]) for f in _failures(run_dir)] == [("g0002", "run",
                                                                                    "g0002.failed.inputs.pt")]
    assert [p.name for p in graphs.glob("*.failed.inputs.pt")] == ["g0002.failed.inputs.pt"]
    run, result = minified(run_dir)
    assert run.code == 0, run.stderr[-2000:]
    assert (result["signature"]["text"], result["verified"]) == ("ValueError: picky_values: a value above N", True)
    assert "saved_input('arg0', 'cpu')" in (run_dir / "repro.py").read_text()
    assert torch.equal(torch.load(run_dir / "repro_inputs.pt", weights_only=True)["arg0"], torch.full((4, 4), 100.0))


def test_after_aot_graph_takes_its_dynamo_parents_values(recorded, tmp_path):
    run_dir = recorded(INDUCTOR_DYNAMIC_SCRIPT)
    failure = load_failing(run_dir, out_dir=tmp_path)
    assert failure.context.stage.value == "aot"
    tensors = [s for s in failure.case.inputs if s.kind == "tensor"]
    assert [(s.shape, s.dtype, s.saved) for s in tensors] == [((6, 5), "float32", "arg2"), ((3,), "int64", "arg4")]
    assert torch.equal(torch.load(tmp_path / "repro_inputs.pt", weights_only=True)["arg4"], torch.tensor([4, 1, 3]))
    assert all(not s.saved for s in load_failing(run_dir).case.inputs if s.kind == "tensor")  # no out_dir: random


def test_the_fallback_is_the_dynamo_graph_with_the_scripts_backend(recorded):
    """When an after-AOT graph does not fail alone, diagnose minifies the Dynamo graph it came from."""
    run_dir = recorded(INDUCTOR_DYNAMIC_SCRIPT)
    after_aot, dynamo = load_failing(run_dir), load_failing(run_dir, dynamo=True)
    index = {e["id"]: e for e in map(json.loads, (run_dir / "graphs" / "index.jsonl").read_text().splitlines())}
    assert index[after_aot.graph_id]["parent"] == dynamo.graph_id
    assert (dynamo.context.stage.value, dynamo.context.backend.name) == ("dynamo", "inductor")
    assert dynamo.expected == after_aot.expected  # the same recorded failure, one level up


def test_aot_inputs_map_to_dynamo_inputs_after_the_lifted_parameters():
    def tensor(*shape, dtype="float32"):
        return TensorSpec(shape, (), dtype)

    dynamo = (ScalarSpec(6), tensor(6, 5), tensor(3, dtype="int64"))
    weight = tensor(5, 5)  # a parameter of the Dynamo graph module: AOTAutograd's first input
    assert _aot_positions(dynamo, (weight, *dynamo)) == {2: 1, 3: 2}
    assert _aot_positions(dynamo, (weight, dynamo[0], tensor(6, 5), tensor(3))) == {}  # a dtype differs
    assert _aot_positions(dynamo, dynamo[1:]) == {}


def test_a_failure_whose_inputs_cannot_be_saved_is_recorded_without_them(tmp_path):
    """Saving values must not turn the failure into another one (a poisoned CUDA context cannot be read)."""
    from pt2doctor.capture.child.graph_recorder import GraphRecorder

    recorder = GraphRecorder(tmp_path)
    (recorder.dir / "g0000.failed.inputs.pt").mkdir()  # where the values would go: saving them fails
    recorder.fail("g0000", "run", RuntimeError("CUDA error: device-side assert triggered"), [torch.arange(3)])
    recorder.close()
    (entry,) = read_failures(tmp_path / "graphs")
    assert entry.graph == "g0000" and entry.values is None


def test_a_cut_node_keeps_the_value_the_graph_computed_there(recorded, minified):
    run_dir = recorded(WRONG_ON_ZEROS, accuracy="1e-4")
    run, result = minified(run_dir)
    assert run.code == 0, run.stderr[-2000:]
    assert (result["signature"]["kind"], result["verified"]) == ("accuracy", True)
    # the zeros enter as the value the graph computed there; with a random stand-in the cos alone passed, and
    # the repro kept the mul that makes them
    assert result["ops"] == ["torch.cos"], result["ops"]
    text = (run_dir / "repro.py").read_text()
    assert "saved_input('node:" in text
    saved = torch.load(run_dir / "repro_inputs.pt", weights_only=True)
    assert list(saved) == [next(line.split("'")[1] for line in text.splitlines() if "saved_input('node:" in line)]
    assert torch.equal(next(iter(saved.values())), torch.zeros(8))  # only what the repro reads is kept
    assert "PT2DOCTOR REPRO FAILED: AccuracyMismatch" in _run_repro(run_dir).stderr


def test_inputs_that_are_views_of_one_tensor_stay_views_of_one_tensor(recorded, minified):
    # pytorch#198095: a mutated input and a view of it, compiled with aot_eager, return the wrong row; the
    # graph alone reproduces only with the write into t0 kept (nothing reads it) and ta a view of t0
    run_dir = recorded((REALBUGS / "synthetic_base_view_output.py").read_text(), accuracy="1e-4")
    run, result = minified(run_dir)
    assert run.code == 0, run.stderr[-2000:]
    assert (result["signature"]["kind"], result["verified"]) == ("accuracy", True)
    assert result["ops"] == ["add_", "_operator.getitem"]
    text = (run_dir / "repro.py").read_text()
    assert "storage0.as_strided(" in text and ".add_(100)" in text
    needs = {(n["name"], n["property"]) for n in result["input_needs"]}
    assert {("l_t0_", "shared storage"), ("l_ta_", "shared storage")} <= needs
    assert "PT2DOCTOR REPRO FAILED: AccuracyMismatch" in _run_repro(run_dir).stderr

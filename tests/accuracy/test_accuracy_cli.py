"""End to end: `pt2doctor accuracy` on planted scripts, with real torch.compile (Inductor, CPU).

The relu bug is Inductor's own test hook (`cpp.inject_relu_bug_TESTING_ONLY="accuracy"`: the C++
relu returns x + 1), so the first divergent node must be the relu, at the user's line.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from accuracy_scripts import SCRIPTS, line_of
from clihelp import pt2doctor


def _graph(run) -> dict:
    (graph,) = run.doc["accuracy"]
    return graph


def test_chain_first_divergent_node_is_the_relu_at_its_user_line(accuracy_run):
    run = accuracy_run("relu_chain.py", "--jobs", "2", "--html")
    assert run.code == 1, run.stderr[-3000:]
    assert "accuracy: WRONG: 1 graph(s): 0 pass, 1 FAIL" in run.stderr  # line one, on stderr under --json
    graph = _graph(run)
    assert graph["graph"] == "0/0" and graph["verdict"] == "fail"
    assert graph["max_abs_err"] > 0.5 and graph["rmse_ratio"] > 100
    first = graph["first_divergent"]
    assert first["op"] == "torch.relu"
    assert first["file"].endswith("relu_chain.py") and first["line"] == line_of("relu_chain.py", "torch.relu(")
    assert first["dtype"] == "float32" and first["shape"] == [64, 32]
    assert {n["op"] for n in graph["top_divergent"]} >= {"torch.relu", "torch.cos"}
    assert not graph["explained"] and graph["causes"] == []


def test_chain_is_minified_to_the_relu_with_a_verified_repro(accuracy_run):
    minified = _graph(accuracy_run("relu_chain.py", "--jobs", "2", "--html"))["minified"]
    assert minified.get("error") is None, minified
    assert minified["ops"] in (["torch.relu"], ["aten.relu.default"])
    assert minified["verified"] and minified["nodes_after"] == 1
    rerun = subprocess.run([sys.executable, minified["repro"]], capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 1 and "AccuracyMismatch" in rerun.stderr


def test_chain_html_report_has_the_accuracy_section(accuracy_run):
    run = accuracy_run("relu_chain.py", "--jobs", "2", "--html")
    page = (run.out_dir / "report.html").read_text()
    assert 'id="extra-accuracy"' in page
    assert f"relu_chain.py:{line_of('relu_chain.py', 'torch.relu(')}" in page


def test_mlp_backward_is_compared_and_the_relu_is_first(accuracy_run):
    run = accuracy_run("relu_mlp.py", "--no-minify")
    assert run.code == 1, run.stderr[-3000:]
    graph = _graph(run)
    assert graph["forward"]["verdict"] == "fail"
    assert graph["backward"] is not None and graph["backward"]["verdict"] == "fail"
    first = graph["first_divergent"]
    assert first["op"] == "torch.nn.functional.relu"
    assert first["line"] == line_of("relu_mlp.py", "functional.relu(")
    assert graph["minified"] is None


def test_dropout_is_flagged_as_rng_and_passes_with_fallback_random(accuracy_run):
    run = accuracy_run("dropout.py", "--no-minify")
    assert run.code == 0, run.stderr[-3000:]
    graph = _graph(run)
    assert graph["verdict"] == "fail" and graph["explained"]
    assert graph["random_ops"] == ["torch.nn.functional.dropout"] and graph["backend"] == "inductor"
    assert "random" in graph["causes"]
    assert graph["recheck"] == {"config": {"inductor_config": {"fallback_random": True}}, "verdict": "pass"}
    assert (run.out_dir / "recheck-fallback-random" / "session.json").exists()


def test_the_probe_leaves_the_users_results_unchanged(accuracy_run):
    """Same seed, same printed result with and without the probe (it restores the RNG state)."""
    run = accuracy_run("dropout.py", "--no-minify")
    plain = subprocess.run([sys.executable, str(SCRIPTS / "dropout.py")], capture_output=True, text=True, timeout=300)
    printed = plain.stdout.strip().splitlines()[-1]
    assert printed in run.stderr  # with --json the script's stdout goes to stderr


def test_bf16_model_within_tolerance_passes_and_is_called_out(accuracy_run):
    run = accuracy_run("bf16.py", "--no-minify")
    assert run.code == 0, run.stderr[-3000:]
    graph = _graph(run)
    assert graph["verdict"] == "pass" and graph["first_divergent"] is None
    assert graph["reduced_precision"] == ["bfloat16"]
    assert graph["rmse_ratio"] is not None and graph["max_abs_err"] is not None


def test_backend_option_compiles_with_another_backend(accuracy_run):
    """The planted bug is Inductor's C++ relu: compiled with aot_eager instead, the chain passes."""
    run = accuracy_run("relu_chain.py", "--backend", "aot_eager", "--no-minify")
    assert run.code == 0, run.stderr[-3000:]
    graph = _graph(run)
    assert graph["verdict"] == "pass" and graph["max_abs_err"] == 0.0 and graph["minified"] is None


@pytest.mark.slow
def test_nondeterministic_graph_is_called_out_and_its_dtype_constant_runs_in_fp64(accuracy_run):
    """A real run-to-run difference (atomic adds from two threads); the graph's baked-in float32 dtype
    is made fp64 in the reference run, so the graph has an fp64 reference."""
    import torch

    if torch.get_num_threads() < 2:
        pytest.skip("one thread: the atomic adds happen in one order")
    run = accuracy_run("scatter_nondeterministic.py", "--no-minify")
    assert run.code == 0, run.stderr[-3000:]
    graph = _graph(run)
    assert graph["verdict"] == "pass" and graph["error"] is None and graph["fp64_unavailable"] is None
    assert graph["deterministic"] is False and graph["run_to_run_max_abs"] > 0
    assert "nondeterminism" in graph["causes"]


def test_tf32_is_called_out_as_reduced_precision(accuracy_run):
    run = accuracy_run("tf32.py", "--no-minify")
    assert run.code == 0, run.stderr[-3000:]
    graph = _graph(run)
    assert "tf32" in graph["reduced_precision"]
    assert graph["verdict"] == "pass"


def test_graph_without_fp64_reference_is_judged_against_eager_and_its_bug_fails(accuracy_run):
    """The bitcast stays float32, so the fp64 run raises inside torch.matmul (FX prints the graph's code
    to stderr then): the softmax bug is still a FAIL, the reason is stated, and no traceback is shown."""
    run = accuracy_run("packed_bits.py", "--no-minify")
    assert run.code == 1, run.stderr[-3000:]
    graph = _graph(run)
    assert graph["verdict"] == "fail" and graph["error"] is None
    assert graph["fp64_unavailable"].startswith("RuntimeError: expected m1 and m2 to have the same dtype")
    assert graph["rmse_ratio"] is None and graph["first_divergent"]["op"] == "torch.softmax"
    assert f"fp64 reference unavailable: {graph['fp64_unavailable'][:40]}" in run.stderr
    assert "Traceback" not in run.stderr and "FX-traced" not in run.stderr


def test_graph_without_fp64_reference_and_without_a_bug_passes_quietly(accuracy_run):
    run = accuracy_run("packed_bits.py", "--backend", "eager", "--no-minify")
    assert run.code == 0, run.stderr[-3000:]
    graph = _graph(run)
    assert graph["verdict"] == "pass" and graph["fp64_unavailable"] and graph["max_abs_err"] == 0.0
    assert "Traceback" not in run.stderr and "FX-traced" not in run.stderr


def test_dropouts_that_do_not_draw_are_not_random_ops(accuracy_run):
    """nn.Dropout in eval mode and F.dropout(p=0.0) return their input: only the softmax bug is left."""
    run = accuracy_run("dropout_backend.py", "--no-minify", args=("eval",))
    assert run.code == 1, run.stderr[-3000:]
    graph = _graph(run)
    assert graph["verdict"] == "fail" and graph["random_ops"] == [] and graph["causes"] == []
    assert graph["first_divergent"]["op"] == "torch.softmax"
    assert "random ops" not in run.stderr


def test_random_ops_under_a_user_backend_are_not_rechecked_with_inductors_config(accuracy_run):
    run = accuracy_run("dropout_backend.py", "--no-minify", args=("train",))
    assert run.code == 1, run.stderr[-3000:]
    graph = _graph(run)
    assert graph["backend"] == "round_softmax_through_bf16"
    assert graph["random_ops"] == ["torch.nn.functional.dropout"] and graph["causes"] == ["random"]
    assert graph["recheck"] is None and not graph["explained"]
    assert not (run.out_dir / "recheck-fallback-random").exists()
    assert "fallback_random" not in run.stderr


def test_a_script_that_fails_with_no_wrong_graph_exits_4_not_1(tmp_path):
    """Issue 40, point 2: `accuracy` tells the script's own failure (4) from wrong results (1), on its first line."""
    script = tmp_path / "gives_up.py"
    script.write_text("import torch\n"
                      "torch.compile(lambda x: x.sin() + 1, backend='eager')(torch.ones(4))\n"
                      "raise RuntimeError('the script gave up')\n")
    run = pt2doctor("accuracy", "--no-minify", "--out", str(tmp_path / "out"), str(script), timeout=600)
    assert run.code == 4, run.stderr[-3000:]
    assert run.stdout.splitlines()[0].startswith("accuracy: THE SCRIPT FAILED, nothing was judged (exit 4)")

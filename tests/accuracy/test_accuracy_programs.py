"""End to end: `pt2doctor accuracy` compares integer outputs exactly, and never changes what a program
prints (real torch.compile, Inductor on CPU)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from accuracy_scripts import SCRIPTS


def _printed(run) -> list[str]:
    """What the script printed under `pt2doctor accuracy --json`: shown on stderr (stdout holds the JSON)
    and kept apart from the script's own stderr (torch's warnings, which depend on what is installed:
    "Failed to initialize NumPy" without numpy) in the run directory's stdout.txt."""
    return (run.out_dir / "stdout.txt").read_text().splitlines()


def test_wrong_integer_outputs_and_a_changed_dtype_fail(accuracy_run):
    """pytorch/pytorch#191499 (uint8 min of 16+ values is 0) and #191308 (int8 matmul returns int64):
    both passed while integer outputs were not compared."""
    run = accuracy_run("int_reductions.py", "--no-minify")
    assert run.code == 1, run.stderr[-3000:]
    smallest, products = run.doc["accuracy"]
    # the uint8 min is wrong only where Inductor vectorises it so (AVX-512 machines; not an AVX2-only one): the
    # program's own output says which this machine is (its true minimum is 1)
    min_wrong = "min 0" in _printed(run)
    assert min_wrong or "min 1" in _printed(run), _printed(run)
    assert (smallest["verdict"], products["verdict"]) == ("fail" if min_wrong else "pass", "fail")
    if min_wrong:
        assert smallest["max_abs_err"] == 1.0 and smallest["first_divergent"]["op"] == "torch.min"
        assert smallest["first_divergent"]["dtype"] == "uint8" and not smallest["explained"]
    assert products["max_abs_err"] == 0.0  # equal values, in the wrong dtype
    assert not products["explained"]


@pytest.mark.parametrize("script", ["mutates_strided_input.py", "func_grad_autograd_function.py"])
def test_the_program_prints_what_it_prints_without_pt2doctor(accuracy_run, script):
    """An in-place update of strided int64 and float64 views used to reach the program's own tensors
    (the fp64 run "cast" them to themselves), and a `torch.func.grad` graph was run with grad off:
    both were reported as wrong, and the first printed different numbers."""
    run = accuracy_run(script, "--no-minify")
    plain = subprocess.run([sys.executable, str(SCRIPTS / script)], capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0 and plain.stdout.strip(), plain.stderr[-2000:]
    assert _printed(run) == plain.stdout.splitlines()
    assert run.code == 0, run.stderr[-3000:]
    assert [(g["verdict"], g["error"]) for g in run.doc["accuracy"]] == [("pass", None)]


@pytest.mark.slow  # a whole diagnosis of its own (35-50 s): the default run stays under 20 min
def test_a_failing_func_grad_graph_is_reported_not_an_internal_error(accuracy_run):
    """FX cannot trace the recorded `torch.func.grad` graph (`_wrap_for_grad(Proxy, 1)`: a TypeError
    that ended `pt2doctor accuracy` with exit 70): the failure is reported with the minifier's reason."""
    script = "func_grad_autograd_function.py"
    run = accuracy_run(script, "--jobs", "2", args=("off_by_one",))
    plain = subprocess.run([sys.executable, str(SCRIPTS / script), "off_by_one"], capture_output=True, text=True,
                           timeout=300)
    assert _printed(run) == plain.stdout.splitlines()
    assert run.code == 1, run.stderr[-3000:]
    (graph,) = run.doc["accuracy"]
    # the minifier now loads such graphs (functorch's scaffolding is recorded as nodes); either way no exit 70
    assert graph["verdict"] == "fail" and (graph["minified"].get("verified") or graph["minified"].get("error")), graph
    if graph["minified"].get("verified"):  # a backend that adds 1 to any output: a graph returning its input fails
        result = json.loads((Path(graph["minified"]["repro"]).parent / "minify.json").read_text())
        assert result["culprit_ops"] == [], result  # what is left is functorch's scaffolding, never a culprit

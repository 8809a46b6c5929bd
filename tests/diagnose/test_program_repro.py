"""`pt2doctor diagnose` on a Dynamo bug that no graph shows: repro.py is the program itself, reduced.

tests/realbugs/closure_list_mutation_in_local_class.py (pytorch#197896): the compiled call drops a closure
list's append made in a local class's method; the captured graph is right, so only the program shows it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pt2doctor.reduce.regression_test import as_a_maintainer_runs_it, missing_dependencies

REALBUGS = Path(__file__).parents[1] / "realbugs"


@pytest.mark.slow
def test_a_dynamo_side_effect_bug_gets_a_verified_reduced_program(diagnosed):
    run, d = diagnosed(REALBUGS / "closure_list_mutation_in_local_class.py")
    p = d["program"]
    assert d["stage"] == "dynamo" and d["category"] == "accuracy" and run.code == 1
    assert p["reason"] == "dynamo" and p["verified"] and d["repro_verified"] and d["repro"] == p["repro_path"]
    assert p["lines_after"] < p["lines_before"] and p["checks"] > 1 and p["backend"] == "eager"
    text = Path(d["repro"]).read_text()
    assert ".append(" in text and "class " in text and "torch.compile(" in text  # the culprit construct stays
    assert "list.append" in d["culprit_ops"] and "pt2doctor" not in text.split('"""', 2)[2]
    assert any("repro.py is the program reduced (the failure is in Dynamo" in note for note in d["notes"])
    issue = (run.out_dir / "issue.md").read_text()
    assert "The program, reduced" in issue and text.strip().splitlines()[-1] in issue


@pytest.mark.slow
def test_the_reduced_program_fails_compiled_and_passes_with_compilation_off(diagnosed):
    run, d = diagnosed(REALBUGS / "closure_list_mutation_in_local_class.py")
    repro = d["repro"]
    compiled = subprocess.run([sys.executable, repro], capture_output=True, text=True, timeout=300)
    assert compiled.returncode == 1 and "AssertionError" in compiled.stderr
    off = ("import runpy, sys, torch; torch.compiler.set_stance('force_eager'); "
           "runpy.run_path(sys.argv[1], run_name='__main__')")
    eager = subprocess.run([sys.executable, "-c", off, repro], capture_output=True, text=True, timeout=300)
    assert eager.returncode == 0, eager.stderr[-2000:]


@pytest.mark.slow
def test_the_reduced_program_comes_with_a_regression_test_in_pytorchs_idiom(diagnosed):
    pytest.importorskip("expecttest")  # torch's test utilities import both
    pytest.importorskip("numpy")
    run, d = diagnosed(REALBUGS / "closure_list_mutation_in_local_class.py")
    test = d["program"]["test"]
    assert test and Path(test).name == "test_repro.py" and "class TestRepro(TestCase):" in Path(test).read_text()
    now = subprocess.run([sys.executable, test], capture_output=True, text=True, timeout=300, cwd=Path(test).parent,
                         env=as_a_maintainer_runs_it())  # CI=true would send run_tests() to CI's XML reporting
    assert now.returncode == 1 and "FAILED (" in now.stderr
    assert "A regression test in PyTorch's test idiom (`test_repro.py`" in (run.out_dir / "issue.md").read_text()


SCRIPTS = Path(__file__).parent / "scripts"


def test_a_minimal_graph_with_no_short_form_hands_over_the_program_reduced(diagnosed):
    # the minimal graph holds torch.cond (a higher-order op: submodules), which has no short form; the harness form
    # stays beside as repro_graph.py, and repro.py is the program reduced, verified both ways, with its test
    run, d = diagnosed(SCRIPTS / "cond_unsupported_backend.py", options=("--program-patience", "20"))
    p, m, short = d["program"], d["minify"], d["short"]
    assert (d["category"], d["stage"], run.code) == ("backend_failure", "backend", 1)
    assert m["verified"] and Path(m["repro_path"]).name == "repro_graph.py" and "class Repro" in Path(
        m["repro_path"]).read_text()
    assert p["reason"] == "short" and p["verified"] and p["lines_after"] < p["lines_before"]
    repro = (run.out_dir / "repro.py").resolve()
    assert d["repro"] == p["repro_path"] == short["repro"] == m["short_repro"] and Path(d["repro"]).resolve() == repro
    assert d["repro_verified"]
    assert short["graph"] == m["repro_path"] and short["lines"] <= 20
    text = repro.read_text()
    assert "torch.cond(" in text and "torch.compile(f, backend=no_cond)" in text and "class Repro" not in text
    if not missing_dependencies():  # PyTorch's test utilities import: the program's own test beside it
        assert d["test"] == p["test"] and Path(d["test"]).resolve() == repro.with_name("test_repro.py")
        assert "TestCase" in Path(d["test"]).read_text()
    assert any(note.startswith("a short repro (the minimal graph has no short form") for note in d["notes"])

"""`pt2doctor diagnose` on scripts that export (and AOT-compile): the entry point, the step, the kind, the
category and the verified fix, on real torch.export runs of tiny CPU programs (one diagnose per script,
shared through the `diagnosed` fixture)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parent / "scripts"


def test_a_data_dependent_branch_is_a_non_strict_tracing_failure_at_the_users_line(diagnosed) -> None:
    run, d = diagnosed(SCRIPTS / "item_branch.py")
    assert run.code == 1, run.stderr[-2000:]
    export = d["export"]
    assert (d["category"], d["stage"]) == ("graph_break", "dynamo")  # tracing is graph capture
    assert (export["entry"], export["step"], export["kind"]) == ("torch.export (non-strict)", "non_strict_trace",
                                                                 "data_dependent")
    assert (Path(export["user_line"]["file"]).name, export["user_line"]["line"]) == ("item_branch.py", 10)
    assert export["other_mode_passes"] is False  # strict export hits the same guard
    labels = [a["label"] for a in d["attempts"]]
    assert "export-strict" in labels and "force_eager" not in labels


def test_the_data_dependent_fix_is_verified_on_a_copy_and_the_users_file_is_untouched(diagnosed) -> None:
    before = (SCRIPTS / "item_branch.py").read_text()
    run, d = diagnosed(SCRIPTS / "item_branch.py")
    fix = d["export"]["fixes"][0]
    assert (fix["text"], fix["at"]["line"], fix["replaces"], fix["verified"]) == ("torch._check(total > 2)", 10, 0,
                                                                                  True)
    assert fix["script_passed"] and "script then passed" in fix["outcome"]
    assert len(d["export"]["fixes"]) == 1  # the first candidate fits: the negation is not tried
    assert (SCRIPTS / "item_branch.py").read_text() == before
    copy = run.out_dir / "export-fix" / "1" / "item_branch.py"
    assert "        torch._check(total > 2)\n        if total > 2:" in copy.read_text()
    assert "torch._check(total > 2)" in run.stdout + run.stderr


def test_a_branch_on_a_tensor_gets_a_verified_torch_cond(diagnosed) -> None:
    run, d = diagnosed(SCRIPTS / "tensor_branch.py")
    [fix] = d["export"]["fixes"]  # torch._check takes no tensor: not tried
    assert fix["text"] == "return torch.cond(x.sum() > 0, lambda: x + 1, lambda: x - 1)"
    assert (fix["at"]["line"], fix["replaces"], fix["verified"], fix["script_passed"]) == (7, 3, True, True)


@pytest.mark.slow  # a whole diagnosis of its own (30-80 s): the default run stays under 20 min
def test_a_bad_dim_range_gets_torchs_suggestion_verified(diagnosed) -> None:
    run, d = diagnosed(SCRIPTS / "bad_dim.py")
    export = d["export"]
    assert (d["category"], export["kind"], export["step"]) == ("user_error", "constraint_violation", "non_strict_trace")
    assert run.code == 2  # the script's own spec is wrong, as for any user error
    fix = export["fixes"][0]
    assert (fix["text"], fix["at"]["line"], fix["replaces"], fix["verified"]) == (
        "b = Dim('b', min=5, max=64)", 13, 1, True)


@pytest.mark.slow  # a whole diagnosis of its own (30-80 s): the default run stays under 20 min
def test_a_strict_only_failure_says_non_strict_exports_it(diagnosed) -> None:
    run, d = diagnosed(SCRIPTS / "strict_only.py")
    export = d["export"]
    assert (d["category"], export["entry"], export["step"], export["kind"]) == (
        "graph_break", "torch.export (strict)", "strict_trace", "unsupported")
    assert export["other_mode_passes"] is True
    assert any("strict=False" in step and "verified" in step for step in d["next_steps"])
    issue = (run.out_dir / "issue.md").read_text()
    assert issue.startswith("# [export]") and "`torch.export (strict)` fails in strict tracing" in issue


@pytest.mark.slow
def test_a_planted_aoti_compile_error_is_aotinductors_not_the_users(diagnosed) -> None:
    run, d = diagnosed(SCRIPTS / "aoti_relu_bug.py", "compile_error")
    export = d["export"]
    assert (d["category"], export["step"], export["kind"], export["eager_passes"]) == (
        "kernel_failure", "aoti_compile", "aoti_compile", True)
    off = next(a for a in d["attempts"] if a["label"] == "force_eager")
    assert off["outcome"] == "pass"  # compilation off, AOTInductor included: the exported program runs eagerly
    issue = (run.out_dir / "issue.md").read_text()
    # issue.md holds the minimal repro (the relu, AOT-compiled again), the whole program beside it
    assert issue.startswith("# [AOTInductor]") and "aoti_compile_and_package(" in issue
    # repro_program.py: the recorded exported program, compiled again in a fresh interpreter, fails the same way
    assert export["repro_verified"] and Path(export["repro"]).name == "repro_program.py", d["notes"]
    assert (run.out_dir / "program.pt2").exists() and not (run.out_dir / "inputs.pt").exists()  # never called
    assert "inject_relu_bug_TESTING_ONLY = 'compile_error'" in Path(export["repro"]).read_text()
    _minimal_relu_repro(run, d, "compile_error")
    assert "Minimal repro (1 node: aten.relu.default; verified" in issue


@pytest.mark.slow
@pytest.mark.parametrize(("bug", "step", "kind", "category"), [
    ("runtime_error", "aoti_run", "aoti_runtime", "kernel_failure"),
    ("accuracy", None, "wrong_result", "accuracy"),  # every step passes; the script's own check fails
])
def test_a_planted_aoti_runtime_error_or_wrong_result_is_aotinductors_with_a_verified_repro(
        diagnosed, bug: str, step: str | None, kind: str, category: str) -> None:
    _skip_unless_packages_run(SCRIPTS / "aoti_relu_bug.py")
    run, d = diagnosed(SCRIPTS / "aoti_relu_bug.py", bug)
    export = d["export"]
    assert (d["category"], export["step"], export["kind"], export["eager_passes"]) == (category, step, kind, True)
    assert export["repro_verified"], d["notes"]
    assert (run.out_dir / "inputs.pt").exists()  # the package was called: its inputs are part of the repro
    _minimal_relu_repro(run, d, bug)


def _skip_unless_packages_run(script: Path) -> None:
    """The script without its bug must load and run its package here: seen with torch 2.11.0+cu130 on the lent
    H100 and H200 machines, `aoti_load_package` dies with SIGSEGV on any package, CPU or CUDA."""
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    if plain.returncode != 0:
        pytest.skip(f"an AOTInductor package does not run here even without the bug (exit {plain.returncode})")


def _minimal_relu_repro(run, d: dict, bug: str) -> None:
    """The exported program's graph (relu, add) minified with AOTInductor as the oracle: the relu alone, in a
    repro.py that exports it, compiles, loads and runs its package with the planted bug, verified."""
    m = d["minify"]
    assert (m["stage"], m["nodes_before"], m["ops"], m["verified"]) == ("aoti", 2, ["aten.relu.default"], True), \
        d["notes"]
    assert d["culprit_ops"] == ["aten.relu.default"] and Path(d["repro"]) == run.out_dir / "repro.py"
    text = Path(d["repro"]).read_text()
    assert f"torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = {bug!r}" in text
    assert "aoti_compile_and_package(" in text and "program.pt2" not in text  # standalone: no recorded program


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.parametrize("bug", ["compile_error", "accuracy"])
def test_an_aoti_cuda_package_with_the_triton_relu_bug_is_minified_to_the_relu(diagnosed, bug: str) -> None:
    script = SCRIPTS / "aoti_relu_bug_cuda.py"
    if bug == "accuracy":  # the package must load and run for its numbers to be wrong
        _skip_unless_packages_run(script)
    run, d = diagnosed(script, bug)
    assert d["category"] == ("kernel_failure" if bug == "compile_error" else "accuracy"), d["headline"]
    m = d["minify"]
    assert (m["stage"], m["ops"], m["verified"]) == ("aoti", ["aten.relu.default"], True), d["notes"]
    text = Path(d["repro"]).read_text()
    assert f"torch._inductor.config.triton.inject_relu_bug_TESTING_ONLY = {bug!r}" in text and "cuda" in text


@pytest.mark.slow
def test_a_decomposition_judged_wrong_in_the_run_is_an_accuracy_failure_of_run_decompositions(diagnosed) -> None:
    run, d = diagnosed(SCRIPTS / "decomp_mutation.py", "check")
    export = d["export"]
    assert (d["category"], d["stage"]) == ("accuracy", "aot_autograd")  # run_decompositions is AOTAutograd's work
    assert (export["step"], export["kind"]) == ("run_decompositions", "wrong_result")
    assert "mutated user inputs none -> ['noise']" in export["judged"]
    assert [a["label"] for a in d["attempts"] if a["label"] == "force_eager"] == []  # judged in the run: no off run
    # where to look: the export path ends the procedure before its own where-to-look step, which named nothing
    assert any("rrelu_with_noise" in r["what"] and r["file"].startswith("torch/") for r in d["where_to_look"]), \
        d["where_to_look"]


REALBUGS = Path(__file__).parents[1] / "realbugs"


@pytest.mark.slow
def test_a_decomposition_crash_in_a_real_program_is_reduced_to_a_verified_program(diagnosed) -> None:
    # pytorch#180354: torch.cond whose branch makes a tensor with torch.tensor crashes run_decompositions
    run, d = diagnosed(REALBUGS / "export_cond_branch_tensor_decomp.py")
    assert (d["category"], d["export"]["step"], d["export"]["kind"]) == ("backend_failure", "run_decompositions",
                                                                         "export_internal")
    # the verdict first: said before the program is reduced (progress, on stderr)
    assert run.stderr.index("verdict: backend_failure in AOTAutograd") < run.stderr.index("reducing the program")
    p = d["program"]
    assert p["verified"] and p["reason"] == "export" and p["lines_after"] < p["lines_before"]
    assert p["passes_with"].startswith("with run_decompositions returning the exported program unchanged")
    assert {"torch.cond", "torch.tensor"} <= set(d["culprit_ops"])  # the calls left in the module it exports
    repro = Path(d["repro"])
    assert repro.parent == run.out_dir and "torch.tensor(" in repro.read_text()
    # standalone: plain python, no pt2doctor, fails with the same error
    alone = subprocess.run([sys.executable, str(repro)], capture_output=True, text=True, timeout=300)
    assert alone.returncode == 1 and "Attempting to use FunctionalTensor on its own" in alone.stderr
    issue = (run.out_dir / "issue.md").read_text()
    assert "The program, reduced" in issue and "passes with run_decompositions returning" in issue


@pytest.mark.slow
def test_a_tracing_failure_torch_causes_is_reduced_with_the_module_still_running_eagerly(diagnosed) -> None:
    # pytorch#171964: re-exporting torch.export.unflatten's module with dynamic_shapes fails in torch's own spec check
    run, d = diagnosed(REALBUGS / "export_unflattened_dynamic_reexport.py")
    assert (d["category"], d["export"]["kind"]) == ("dynamo_internal", "export_internal")
    p = d["program"]
    assert p["verified"] and p["lines_after"] < p["lines_before"] and p["passes_with"] == ""
    text = Path(d["repro"]).read_text()
    assert "torch.export.unflatten(" in text and "dynamic_shapes" in text


@pytest.mark.slow
def test_a_check_that_fails_after_export_and_passes_with_export_off_is_the_exported_programs(diagnosed) -> None:
    run, d = diagnosed(SCRIPTS / "global_specialized.py", options=("--program-budget", "30"))
    export = d["export"]
    assert (d["category"], d["stage"], run.code) == ("accuracy", "dynamo", 1)  # not the script's own error
    assert (export["step"], export["kind"]) == ("non_strict_trace", "wrong_result")
    assert [a["outcome"] for a in d["attempts"] if a["label"] == "export-off"] == ["pass"]
    assert any("specializes on what it saw while tracing" in s for s in d["next_steps"])
    p = d["program"]
    assert p["verified"] and p["passes_with"].startswith("with export off")
    assert "torch.export.export(" in Path(d["repro"]).read_text()

"""`pt2doctor diagnose` end to end on planted failures: one per category and per stage, real torch.compile.

Each planted script is diagnosed once per session (`diagnosed`, in tests/conftest.py), and the tests
read that one result.
The cases that compile with Inductor (tens of seconds each on two cores) are marked slow.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from clihelp import SCRIPTS, CliRun, pt2doctor

from pt2doctor.reduce.regression_test import as_a_maintainer_runs_it, missing_dependencies

HERE = Path(__file__).parent / "scripts"
# a Dynamo-stage failure also gets its program reduced: a short budget keeps these runs fast
QUICK_PROGRAM = ("--program-budget", "30")


def _assert_bundle(run: CliRun, d: dict) -> None:
    assert d["schema"] == "pt2doctor.diagnosis/2"
    for key in ("category", "stage", "stages", "subsystem", "flaky", "repro", "repro_verified", "minified_nodes",
                "culprit_ops", "user_frames", "timings"):
        assert key in d
    assert d["timings"]["total"] > 0
    # what is handed over, and nothing unverified beside it: the short forms not handed over are gone
    assert not [p.name for p in run.out_dir.glob("repro_short*.py")] + [
        p.name for p in run.out_dir.glob("test_repro?*.py")]
    assert not (run.out_dir / "test_repro.py").exists() or Path(d["test"] or "").name == "test_repro.py"
    if d["category"] not in (None, "user_error") and not d["flaky"]:
        issue = (run.out_dir / "issue.md").read_text()
        assert issue.startswith("# [")
        assert "### Versions" in issue and "- torch: " in issue
        assert "| backend | result |" in issue


def _refails_fresh(repro: str) -> str:
    proc = subprocess.run([sys.executable, repro], capture_output=True, text=True, timeout=300, cwd=Path(repro).parent)
    assert proc.returncode != 0, proc.stdout
    return proc.stderr


@pytest.mark.slow  # a whole diagnosis of its own (30-80 s): the default run stays under 20 min
def test_dynamo_failure_names_the_users_line(diagnosed):
    run, d = diagnosed(HERE / "dynamo_failure.py", options=QUICK_PROGRAM)
    _assert_bundle(run, d)
    assert run.code == 1
    assert d["category"] == "graph_break"
    assert d["stage"] == "dynamo"
    assert d["stages"]["eager"] == "fail"
    assert any(f["file"].endswith("dynamo_failure.py") and f["line"] == 7 for f in d["user_frames"])
    labels = [a["label"] for a in d["attempts"]]
    assert "force_eager" in labels
    # no graph to minify: repro.py is the program reduced, still failing on the branch
    assert d["program"]["reason"] == "dynamo" and d["repro"] == d["program"]["repro_path"]
    assert d["repro_verified"] and "if " in Path(d["repro"]).read_text()


@pytest.mark.slow  # a whole diagnosis of its own (35-50 s): the default run stays under 20 min
def test_a_hard_recompile_limit_is_explained_by_the_guard_that_failed(diagnosed):
    """fail_on_recompile_limit_hit is the program's choice: diagnose says why it recompiled, not 'a Dynamo bug'."""
    run, d = diagnosed(HERE / "recompile_limit_fail.py")
    assert run.code == 1 and d["category"] == "recompilation"
    (hit,) = json.loads((run.out_dir / "runs" / "original-1" / "session.json").read_text())["limit_hits"]
    assert hit["function"] == "scale" and hit["fatal"] and hit["guard_failures"][0]["subject"] == "k"
    steps = " ".join(d["next_steps"])
    assert "not a compiler bug" in steps and "`k`" in steps and "Dynamo bug" not in steps
    assert "replay" not in d["timings"]


def test_a_compile_failure_suppressed_by_the_script_is_named_not_reported_as_nothing(diagnosed):
    run, d = diagnosed(HERE / "suppressed.py")
    assert run.code == 0 and d["category"] is None
    assert "1 compile(s) failed and ran eagerly" in d["headline"] and "cos is unsupported" in d["headline"]
    assert any("suppress_errors = False" in step for step in d["next_steps"])


@pytest.mark.slow  # a whole diagnosis of its own (30-80 s): the default run stays under 20 min
def test_dynamo_internal_error_replays_its_frame_alone(diagnosed):
    """The guide's record/replay, working: replay.py compiles the failing frame again and fails the same way."""
    run, d = diagnosed(HERE / "dynamo_internal.py", options=QUICK_PROGRAM)
    _assert_bundle(run, d)
    assert d["category"] == "dynamo_internal" and d["stage"] == "dynamo"
    first = d["user_frames"][0]
    assert (first["file"], first["line"]) == (str(HERE / "dynamo_internal.py"), 8)
    assert d["replay_verified"] is True
    assert 'backend="eager", dynamic=True)' in Path(d["replay"]).read_text()  # compiled as the script compiles it
    stderr = _refails_fresh(d["replay"])
    assert "InternalTorchDynamoError: KeyError: planted Dynamo internal error" in stderr
    assert "recompile limit" not in stderr


def test_recompile_limit_failure_is_a_dynamo_stage_recompilation(diagnosed):
    run, d = diagnosed(SCRIPTS / "recompile_limit.py")
    _assert_bundle(run, d)
    assert d["category"] == "recompilation" and d["stage"] == "dynamo"
    assert next(a for a in d["attempts"] if a["label"] == "force_eager")["outcome"] == "pass"
    assert d["repro"] is None


def test_custom_backend_failure_minifies_to_the_op_it_rejects(diagnosed):
    run, d = diagnosed(HERE / "custom_backend.py")
    _assert_bundle(run, d)
    assert d["category"] == "backend_failure"
    assert d["stage"] == "backend"
    assert d["original_backend"] == "picky_backend"
    assert d["stages"] == {"eager": "pass", "aot_eager": "pass", "aot_eager_decomp_partition": "pass",
                           "picky_backend": "fail"}
    assert d["repro_verified"] and d["minified_nodes"] == 1
    assert any("sigmoid" in op for op in d["culprit_ops"])
    repro_text = Path(d["repro"]).read_text()
    assert "def picky_backend" in repro_text and "pt2doctor" not in repro_text.split('"""', 2)[2]
    assert "NotImplementedError" in _refails_fresh(d["repro"])


def test_a_backend_defined_in_the_script_is_in_the_short_form_as_written_with_its_test(diagnosed):
    """The short form carries the user's backend as the script defines it (`backend=picky_backend`): no program
    reduction (which, on a ResNet training script, ran 229 checks and reduced the backend itself to a `raise`); the
    harness form is repro_graph.py, and test_repro.py the short form in a TestCase, verified, in issue.md."""
    run, d = diagnosed(HERE / "custom_backend.py")
    assert d["program"] is None and d["short"]["repro"] == d["repro"] and d["repro_verified"]
    assert Path(d["short"]["graph"]).name == "repro_graph.py" and d["short"]["lines"] <= 30
    short = Path(d["repro"]).read_text()
    assert "backend=picky_backend, fullgraph=True" in short and 'raise NotImplementedError("picky_backend' in short
    if missing_dependencies():
        assert d["test"] is None and any("no regression test" in note for note in d["notes"])
        return
    test = Path(d["test"])
    assert test.name == "test_repro.py" and "class TestRepro(TestCase):" in test.read_text()
    ran = subprocess.run([sys.executable, str(test)], capture_output=True, text=True, timeout=300, cwd=test.parent,
                         env=as_a_maintainer_runs_it())
    assert ran.returncode == 1 and "FAILED (" in ran.stderr and "NotImplementedError" in ran.stderr
    assert "A regression test in PyTorch's test idiom (`test_repro.py`" in (run.out_dir / "issue.md").read_text()


def test_the_users_own_backend_is_fixed_there_not_filed_and_progress_has_no_moving_total(diagnosed):
    run, d = diagnosed(HERE / "custom_backend.py")
    steps = " ".join(d["next_steps"])
    assert "fix it there; repro.py defines it from your source" in steps and "File issue.md" not in steps
    assert "runs done)" in run.stderr and not re.search(r"\d+ of \d+ runs", run.stderr)
    assert all(result != "skipped" for result in d["stages"].values())  # every stage run that ended is shown


def test_the_stage_of_a_graph_failure_is_found_on_the_recorded_graph_not_by_running_the_program(diagnosed):
    """Issue 38: the ladder climbed on the recorded graph in warm workers; the whole program runs to reproduce
    and to confirm what is handed over, each run counted by its step."""
    run, d = diagnosed(HERE / "custom_backend.py")
    assert not [a for a in d["attempts"] if a["step"] == "stages"]
    assert any("the stage was found on recorded graph" in note for note in d["notes"])
    steps = {s["step"]: s for s in d["runs"]["steps"]}
    assert steps["reproduce"]["whole"] == 2 and steps["stage_evidence"]["graph"] == 4
    assert d["runs"]["whole"] == len(d["attempts"]) and set(steps) <= set(d["timings"])
    # the first run starts anew, as the user's own; its repeat is forked from an interpreter that has imported torch
    # (the control) and, as it failed the same way, so is every run after it
    assert [a["forked"] for a in d["attempts"]] == [False] + [True] * (len(d["attempts"]) - 1)
    assert "never autotuning results" in d["runs"]["caches"]  # which caches the runs shared, said
    assert d["pending"] == [] and d["stopped_by"] == ""
    assert "verdict: backend_failure in the custom backend" in run.stderr  # progress, on stderr
    # the summary, on stdout as every command's (issue 40, point 5)
    assert f"runs: {d['runs']['whole']} whole-program runs (reproduce 2" in run.stdout.replace("\n", " ")


def test_report_reads_a_diagnose_directory_back(diagnosed, tmp_path):
    run, d = diagnosed(HERE / "custom_backend.py")
    again = pt2doctor("report", "--json", "--html", "-o", str(tmp_path / "page.html"), str(run.out_dir))
    assert again.code == 0, again.stderr[-2000:]
    assert json.loads(again.stdout)["stages"] == d["stages"]
    page = (tmp_path / "page.html").read_text()
    assert 'id="extra-diagnosis"' in page and "picky_backend" in page


def test_user_error_stops_after_compilation_off(diagnosed):
    run, d = diagnosed(SCRIPTS / "user_error.py")
    _assert_bundle(run, d)
    assert run.code == 2
    assert d["category"] == "user_error" and d["stage"] is None  # no compiler stage is to blame
    assert d["repro"] is None and d["bisection"] is None
    off = next(a for a in d["attempts"] if a["label"] == "force_eager")
    assert off["outcome"] == "fail" and "ValueError" in off["signature"]


@pytest.mark.slow  # a whole diagnosis, one run at a time (40 s); a flaky repro's verification: test_classification
def test_flaky_failure_is_reported_with_both_outcomes_and_not_minified(diagnosed, tmp_path):
    # one run at a time: the script fails in whichever run starts first, which must be a run of the script as
    # written (with the stage runs beside them, on many cores a stage run can claim the failure)
    run, d = diagnosed(HERE / "flaky.py", str(tmp_path), options=("--jobs", "1"))
    assert run.code == 3
    assert d["flaky"] is True
    outcomes = sorted(a["outcome"] for a in d["attempts"][:2])
    assert outcomes == ["fail", "pass"]
    assert d["repro"] is None and d["stages"] == {}
    assert not (run.out_dir / "issue.md").exists()


def test_success_exits_zero(tmp_path):
    script = tmp_path / "fine.py"
    script.write_text("import torch\nprint(torch.compile(lambda x: x + 1, backend='eager')(torch.ones(2)))\n")
    run = pt2doctor("diagnose", "--out", str(tmp_path / "out"), str(script))
    assert run.code == 0, run.stderr[-2000:]
    d = json.loads((tmp_path / "out" / "diagnosis.json").read_text())
    assert d["category"] is None and "nothing fails" in d["headline"]
    assert "nothing fails" in run.stdout
    # the stage runs queued at the start are not wanted now: stopped at once, and quietly
    assert "SIGKILL" not in run.stderr and "SIGTERM" not in run.stderr, run.stderr
    assert "".join(run.stdout.split()).endswith("report.html"), run.stdout  # nothing reports after the bundle


@pytest.mark.slow  # a whole diagnosis of its own (30-80 s): the default run stays under 20 min
def test_function_limits_compilation_to_functions_of_that_name(diagnosed):
    """`--function good` (TORCHDYNAMO_DEBUG_FUNCTION): `bad` runs uncompiled, so nothing fails."""
    run, d = diagnosed(HERE / "two_functions.py", options=("--function", "good"))
    assert run.code == 0 and d["category"] is None
    run, d = diagnosed(HERE / "two_functions.py", options=("--function", "bad", "--no-minify"))
    assert run.code == 1 and d["stage"] == "backend" and d["original_backend"] == "refusing_backend"


@pytest.mark.slow
def test_a_script_that_segfaults_without_compiling_is_a_user_error(diagnosed):
    run, d = diagnosed(SCRIPTS / "segfault.py")
    assert d["category"] == "user_error" and run.code == 2
    assert all(a["signature"] == "SIGSEGV" for a in d["attempts"])


def test_bad_input_is_a_usage_error(tmp_path):
    run = pt2doctor("diagnose", "--out", str(tmp_path / "out"), str(tmp_path / "missing.py"))
    assert run.code == 64 and "no such script" in run.stderr
    bad = tmp_path / "bad.py"
    bad.write_text("def f(:\n")
    run = pt2doctor("diagnose", "--out", str(tmp_path / "out"), str(bad))
    assert run.code == 2
    d = json.loads((tmp_path / "out" / "diagnosis.json").read_text())
    assert d["category"] == "user_error" and d["user_frames"][0]["line"] == 1


@pytest.mark.slow
def test_aot_failure_is_blamed_on_aot_autograd(diagnosed):
    run, d = diagnosed(HERE / "aot_failure.py")
    _assert_bundle(run, d)
    assert d["stage"] == "aot_autograd"
    assert d["stages"]["eager"] == "pass" and d["stages"]["aot_eager"] == "fail"
    # above the rung that failed: stopped unused ("skipped"), or, where its program run ended before the stage step
    # read the ladder (all rungs are queued at once), reported as it ran (`narrowing.stages`)
    assert d["stages"]["aot_eager_decomp_partition"] in ("skipped", "fail")


@pytest.mark.slow
def test_decomposition_failure_is_blamed_on_decompositions(diagnosed):
    run, d = diagnosed(HERE / "decomp_failure.py")
    _assert_bundle(run, d)
    assert d["stage"] == "decomp_partition"
    assert d["stages"] == {"eager": "pass", "aot_eager": "pass", "aot_eager_decomp_partition": "fail",
                           "inductor": "skipped"}


@pytest.mark.slow
def test_inductor_codegen_failure_bisects_to_the_relu_lowering(diagnosed):
    run, d = diagnosed(HERE / "inductor_compile_error.py")
    _assert_bundle(run, d)
    assert d["category"] == "kernel_failure"
    assert d["stage"] == "inductor"
    assert d["culprit_ops"] == ["aten.relu.default"] and d["minified_nodes"] == 1
    assert d["repro_verified"]
    assert d["subsystem"] == "lowerings" and "relu" in d["bisection"]["debug_info"]
    assert "CppCompileError" in _refails_fresh(d["repro"])
    assert (run.out_dir / "report.html").exists()
    # the control: one op through Inductor compiles here, so the program is what fails, not the machine
    assert d["control"]["fails_the_same_way"] is False and d["control"]["ended"] == "passed"
    # the maintainers' form: repro.py is plain torch in one screen, the minifier's harness beside it, and a
    # regression test in PyTorch's idiom that fails now (issue 27)
    repro = Path(d["repro"])
    assert repro.name == "repro.py" and d["short"]["lines"] == len(repro.read_text().splitlines()) <= 40
    assert "torch.compile(fn, backend='inductor'" in repro.read_text() and "make_inputs" not in repro.read_text()
    assert Path(d["short"]["graph"]).name == "repro_graph.py" and d["minify"]["repro_path"] == d["short"]["graph"]
    assert d["short"]["runs"] == {"failed": 2, "runs": 2} or d["short"]["runs"]["failed"] == d["short"]["runs"]["runs"]
    assert Path(d["short"]["test"]).name == "test_repro.py"
    assert "class TestRepro(TestCase):" in (run.out_dir / "issue.md").read_text()
    # where to look (issue 27): the relu lowering in the installed torch, named in issue.md
    lowering = [r for r in d["where_to_look"] if r["file"] == "torch/_inductor/lowering.py"]
    assert lowering and lowering[0]["line"] > 0 and "aten.relu.default" in lowering[0]["what"]
    assert f"`torch/_inductor/lowering.py:{lowering[0]['line']}`" in (run.out_dir / "issue.md").read_text()
    assert "where_to_look" in d["timings"]


def test_runtime_abort_is_a_runtime_crash_minified_to_the_op(diagnosed):
    run, d = diagnosed(HERE / "runtime_abort.py")
    _assert_bundle(run, d)
    assert d["category"] == "runtime_crash"
    assert d["stage"] == "backend"
    assert all(a["signature"] == "SIGABRT" for a in d["attempts"][:2])
    assert d["repro_verified"] and d["minified_nodes"] == 1
    assert any("sigmoid" in op for op in d["culprit_ops"])


@pytest.mark.slow
def test_inductor_runtime_error_is_a_kernel_failure_minified_to_relu(diagnosed):
    run, d = diagnosed(HERE / "inductor_runtime_error.py")
    _assert_bundle(run, d)
    assert d["category"] == "kernel_failure"
    assert d["stage"] == "inductor"
    assert d["culprit_ops"] == ["aten.relu.default"] and d["repro_verified"]


@pytest.mark.slow
def test_accuracy_bug_found_by_the_scripts_own_check(diagnosed):
    run, d = diagnosed(HERE / "accuracy_bug.py")
    _assert_bundle(run, d)
    assert d["category"] == "accuracy"
    assert d["stage"] == "inductor"
    assert d["culprit_ops"] == ["aten.relu.default"] and d["repro_verified"]
    # repro.py in PyTorch's idiom fails its assert_close; the minifier's harness form (repro_graph.py) its accuracy rule
    assert "compiled differs from eager" in _refails_fresh(d["repro"])
    assert "AccuracyMismatch" in _refails_fresh(d["short"]["graph"])


@pytest.mark.slow
def test_a_hang_in_the_backend_is_a_timeout_at_the_backend_stage(diagnosed):
    run, d = diagnosed(HERE / "backend_hang.py", options=("--timeout", "25"))
    _assert_bundle(run, d)
    assert d["category"] == "timeout"
    assert d["stage"] == "backend"
    assert d["stages"]["eager"] == "pass"


@pytest.mark.slow  # a whole diagnosis of its own (30-80 s): the default run stays under 20 min
def test_a_kernel_error_reported_late_is_tied_to_the_graph_that_launched_it(diagnosed):
    """CUDA's way of reporting (simulated on CPU): the error shows after the graph returned, so the
    recorder saw no graph fail; the re-run with CUDA_LAUNCH_BLOCKING=1 ties it to the graph."""
    script = HERE / "late_kernel_error.py"
    run, d = diagnosed(script, options=("--no-minify",))
    _assert_bundle(run, d)
    assert d["category"] == "runtime_crash" and d["stage"] == "backend"
    assert "cuda-launch-blocking" in [a["label"] for a in d["attempts"]]
    assert any("CUDA_LAUNCH_BLOCKING=1" in note and "g0000" in note for note in d["notes"])
    lines = script.read_text().splitlines()
    first = d["user_frames"][0]
    assert lines[first["line"] - 1].startswith("y = f(")  # the compiled call, not the later raise


@pytest.mark.slow
@pytest.mark.gpu
def test_a_cuda_device_assert_after_the_graph_returned_is_minified_from_its_graph(diagnosed):
    run, d = diagnosed(HERE / "gpu_late_device_assert.py")
    _assert_bundle(run, d)
    assert d["stage"] == "backend"
    assert any("CUDA_LAUNCH_BLOCKING=1" in note for note in d["notes"])
    assert d["repro_verified"] and d["minified_nodes"] == 1
    assert "device-side assert" in _refails_fresh(d["repro"])


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.parametrize("bug", ["compile_error", "accuracy"])
def test_triton_relu_bug_on_cuda(diagnosed, bug):
    run, d = diagnosed(HERE / "gpu_triton_bug.py", bug)
    _assert_bundle(run, d)
    assert d["stage"] == "inductor"
    assert d["culprit_ops"] == ["aten.relu.default"] and d["repro_verified"]
    assert d["environment"]["gpu"]
    assert "device='cuda" in Path(d["repro"]).read_text() or "'cuda" in Path(d["repro"]).read_text()


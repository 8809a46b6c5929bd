"""Failure classification as a table: hand-built failures (types, messages and frames as torch 2.13 raises
them) and the category each must get. One row per rule, plus the rows where two rules compete."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pt2doctor.analysis.failures import classify
from pt2doctor.diagnose.conclusions import conclude, refine_category
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.frozen import freeze
from pt2doctor.model import Category, Failure
from pt2doctor.model.diagnosis import FailingStage
from pt2doctor.model.minify import FailureKind, FailureSignature, MinifyResult, Stage, VerifyRuns
from pt2doctor.report.issue import write_bundle

DYNAMO = 'File "/site-packages/torch/_dynamo/output_graph.py", line 1700, in call_user_compiler\n'
INDUCTOR = 'File "/site-packages/torch/_inductor/compile_fx.py", line 800, in compile_fx_inner\n'
USER = 'File "/w/train.py", line 12, in <module>\n'
GENERATED = 'File "/tmp/torchinductor_root/ab/cabc123.py", line 40, in call\n'


def failure(exception: str, message: str = "", *, origin: str = "exception", traceback: str = USER,
            chain: tuple[str, ...] = ()) -> Failure:
    return Failure(Category.UNCLASSIFIED, exception, message, "/w/train.py", 12, origin=origin,  # type: ignore[arg-type]
                   chain=chain, traceback=traceback)


TABLE = [
    ("timeout", failure("Timeout", "stopped after 10 s", origin="timeout"), Category.TIMEOUT),
    ("segfault", failure("SIGSEGV", "killed by signal 11", origin="signal"), Category.RUNTIME_CRASH),
    ("CUDA error text", failure("RuntimeError", "CUDA error: an illegal memory access was encountered",
                                traceback=USER + GENERATED), Category.RUNTIME_CRASH),
    ("recompile limit, fatal", failure("torch._dynamo.exc.FailOnRecompileLimitHit", "recompile_limit reached",
                                       traceback=USER + DYNAMO), Category.RECOMPILATION),
    ("fullgraph break", failure("torch._dynamo.exc.Unsupported", "Data-dependent branching\n  Explanation: ...",
                                traceback=USER + DYNAMO), Category.GRAPH_BREAK),
    ("a compile that failed on a break", failure("Unsupported", "Explanation: x", origin="compile", traceback=""),
     Category.GRAPH_BREAK),
    ("C++ compile error", failure("torch._inductor.exc.InductorError",
                                  "CppCompileError: C++ compile error\n/tmp/torchinductor_root/x.cpp:3: error: ...",
                                  traceback=USER + DYNAMO + INDUCTOR), Category.KERNEL_FAILURE),
    ("a generated kernel raised at run time", failure("IndexError", "index 5 is out of bounds",
                                                      traceback=USER + GENERATED), Category.KERNEL_FAILURE),
    ("lowering error", failure("torch._dynamo.exc.BackendCompilerFailed",
                               "backend='inductor' raised:\nLoweringException: AssertionError: ",
                               traceback=USER + DYNAMO + INDUCTOR), Category.BACKEND_FAILURE),
    ("a custom backend raised", failure("torch._dynamo.exc.BackendCompilerFailed",
                                        "backend='my_backend' raised:\nRuntimeError: no", traceback=USER + DYNAMO),
     Category.BACKEND_FAILURE),
    ("a compiled graph raised as it ran", failure("RuntimeError", "bad", origin="graph"), Category.BACKEND_FAILURE),
    ("the script's own accuracy check",
     failure("AssertionError", "Tensor-likes are not close!\nMismatched elements: 3"), Category.ACCURACY),
    ("Dynamo internal", failure("torch._dynamo.exc.InternalTorchDynamoError", "AttributeError: x",
                                traceback=USER + DYNAMO), Category.DYNAMO_INTERNAL),
    ("an error inside the compiler stack", failure("AttributeError", "'NoneType' has no attribute 'x'",
                                                   origin="compile", traceback=USER + DYNAMO),
     Category.DYNAMO_INTERNAL),
    ("an op's own check, raised on fake tensors", failure(
        "torch._dynamo.exc.TorchRuntimeError", "RuntimeError when making fake tensor call\n  Explanation: Dynamo "
        "failed to run FX node with fake tensors: call_function <built-in function matmul>(*(FakeTensor(..., "
        "size=(3, 4)), FakeTensor(..., size=(5, 6))), **{}): got RuntimeError('a and b must have same reduction dim')",
        traceback=USER + DYNAMO), Category.USER_ERROR),
    ("fake tensors without a kernel", failure(
        "torch._dynamo.exc.TorchRuntimeError", "Dynamo failed to run FX node with fake tensors: call_function "
        "mylib.op(*(FakeTensor(..., size=(3,)),), **{}): got NotImplementedError('no fake impl')",
        traceback=USER + DYNAMO), Category.DYNAMO_INTERNAL),
    ("the script's own error", failure("ValueError", "bad config"), Category.USER_ERROR),
    ("a syntax error", failure("SyntaxError", "invalid syntax"), Category.USER_ERROR),
    ("Ctrl-C", failure("KeyboardInterrupt", "", origin="interrupt"), Category.UNCLASSIFIED),
]


@pytest.mark.parametrize(("name", "given", "expected"), TABLE, ids=[row[0] for row in TABLE])
def test_classification(name: str, given: Failure, expected: Category) -> None:
    assert classify(given) is expected, name


def test_a_backend_failure_headline_names_the_error_not_dynamos_wrapper_line() -> None:
    from pt2doctor.analysis.verdict import verdict_for
    from pt2doctor.model import SCHEMA, ExitInfo, Session

    raised = failure("torch._dynamo.exc.BackendCompilerFailed",
                     "backend='my_backend' raised:\nRuntimeError: " + "cannot allocate memory " * 12,
                     traceback=USER + DYNAMO)
    headline = verdict_for(Session(SCHEMA, "2.13.0", (), ExitInfo(code=1), failures=(raised,))).headline
    assert "raised:" not in headline and "RuntimeError: cannot allocate" in headline
    assert headline.endswith("…") and not headline.endswith("memor…")  # cut at a word


def _verdict(session_exit, *failures: Failure):
    from pt2doctor.analysis.verdict import verdict_for
    from pt2doctor.model import SCHEMA, Session

    return verdict_for(Session(SCHEMA, "2.13.0", (), session_exit, failures=failures))


def test_ctrl_c_is_an_interruption_not_an_unclassified_failure() -> None:
    from pt2doctor.model import ExitInfo

    verdict = _verdict(ExitInfo(code=None, interrupted=True), failure("KeyboardInterrupt", "", origin="interrupt"))
    assert verdict.headline == "INTERRUPTED with Ctrl-C at /w/train.py:12"
    assert verdict.category is None and verdict.exit_code == 130


def test_a_sigkill_says_it_is_usually_the_out_of_memory_killer() -> None:
    from pt2doctor.analysis.failures import explain_failure

    killed = failure("SIGKILL", "the process died with SIGKILL", origin="signal")
    assert any("out-of-memory killer" in note for note in explain_failure(killed).notes)
    assert not explain_failure(failure("SIGSEGV", "died", origin="signal")).notes


def test_what_to_do_keeps_the_worst_of_each_kind() -> None:
    from pt2doctor.analysis import what_to_do
    from pt2doctor.model import Finding, Severity

    breaks = tuple(Finding("graph_break", Severity.WARNING, f"break {i}", fix=("f",), weight=100 - i) for i in range(7))
    recompile = Finding("recompile", Severity.WARNING, "f recompiled 9x", fix=("mark it dynamic",), weight=45)
    expected = Finding("recompile", Severity.INFO, "once, to become dynamic", fix=("x",), weight=5)
    chosen = what_to_do((*breaks, recompile, expected))
    assert len(chosen) == 5 and recompile in chosen and expected not in chosen
    assert chosen[0].title == "break 0"


@pytest.mark.parametrize(("message", "says"), [
    ("backend='inductor' raised:\nLoweringException: AssertionError: \n  target: aten.cummin.default\n  args[0]: x",
     "LoweringException: AssertionError: (target: aten.cummin.default)"),
    ("CppCompileError: C++ compile error\n\nOutput:\n/usr/include/c.h:3:1: warning: deprecated\n"
     "/tmp/torchinductor_u/ab/cab.cpp:12:5: error: 'half' was not declared in this scope",
     "CppCompileError: C++ compile error: /tmp/torchinductor_u/ab/cab.cpp:12:5: error: 'half' was not declared in "
     "this scope"),
    ("RuntimeError: boom\nmore", "RuntimeError: boom"),
])
def test_the_line_that_says_what_went_wrong(message: str, says: str) -> None:
    from pt2doctor.analysis.failures import first_message_line

    assert first_message_line(message) == says


def test_a_generated_file_under_a_moved_inductor_cache_is_not_the_users(monkeypatch, tmp_path) -> None:
    from pt2doctor.capture.process_meta import is_user_file

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    assert not is_user_file(str(tmp_path / "cache" / "ab" / "cabcdef.py"))
    assert is_user_file(str(tmp_path / "train.py"))


@pytest.mark.parametrize(("category", "stage", "refined"), [
    (Category.BACKEND_FAILURE, FailingStage.DYNAMO, Category.DYNAMO_INTERNAL),  # backend='eager' compiles nothing
    (Category.BACKEND_FAILURE, FailingStage.INDUCTOR, Category.BACKEND_FAILURE),
    (Category.BACKEND_FAILURE, FailingStage.BACKEND, Category.BACKEND_FAILURE),  # the script's own backend
    (Category.USER_ERROR, FailingStage.DYNAMO, Category.ACCURACY),  # the script's check fails only compiled
    (Category.RUNTIME_CRASH, FailingStage.DYNAMO, Category.RUNTIME_CRASH),
])
def test_the_failing_stage_refines_the_category(category, stage, refined):
    found = Found(command=("python", "train.py"), category=category, stage=stage)
    refine_category(found)
    assert found.category is refined


def _minified(runs: VerifyRuns, repro: Path) -> MinifyResult:
    repro.write_text("import torch\n")
    return MinifyResult("g0001", Stage.AOT, FailureSignature(FailureKind.EXCEPTION, "RuntimeError: boom"), 9, 1,
                        ("aten.relu.default",), ("aten.relu.default",), 12, 3, 4.5, runs.every_time, str(repro),
                        verify_runs=runs)


def test_a_repro_that_fails_only_in_some_of_its_verification_runs_makes_the_diagnosis_flaky(tmp_path):
    """Both runs of the script failed, but repro.py failed in 1 of its 2 runs: a coin toss, said with the rate
    in the headline, diagnosis.json and issue.md, and exit 3 (flaky), never a deterministic bug."""
    found = Found(command=("train.py",), category=Category.BACKEND_FAILURE, stage=FailingStage.INDUCTOR,
                  error="RuntimeError: boom", stages={"aot_eager_decomp_partition": "pass", "inductor": "fail"})
    found.minify = _minified(VerifyRuns(1, 2), tmp_path / "repro.py")
    conclude(found)
    diagnosis = freeze(found)
    assert diagnosis.flaky and diagnosis.exit_code == 3 and not diagnosis.repro_verified
    assert diagnosis.headline.startswith("flaky: repro.py failed the same way in 1/2 runs")
    assert diagnosis.repro_runs == VerifyRuns(1, 2)
    write_bundle(diagnosis, None, tmp_path)
    assert json.loads((tmp_path / "diagnosis.json").read_text())["repro_runs"] == {"failed": 1, "runs": 2}
    assert "flaky: `python repro.py` fails the same way only sometimes (failed the same way in 1/2 runs" in (
        tmp_path / "issue.md").read_text()


def test_a_repro_that_fails_in_every_verification_run_is_verified(tmp_path):
    found = Found(command=("train.py",), category=Category.BACKEND_FAILURE, stage=FailingStage.INDUCTOR,
                  error="RuntimeError: boom", stages={"aot_eager_decomp_partition": "pass", "inductor": "fail"})
    found.minify = _minified(VerifyRuns(2, 2), tmp_path / "repro.py")
    conclude(found)
    diagnosis = freeze(found)
    assert not diagnosis.flaky and diagnosis.exit_code == 1 and diagnosis.repro_verified
    assert not diagnosis.headline.startswith("flaky")


def test_a_compile_failure_the_script_caught_decides_the_category_not_its_own_assertion():
    """Issue 39, point 4: a harness caught Inductor's compile error and asserted; the trace still holds the failed
    compile, and that is what the compiler did."""
    from pt2doctor.analysis.failures import caught_compile_failure

    asserted = replace(failure("AssertionError", "compiled f does not match eager"), category=Category.USER_ERROR)
    compiled = replace(failure("InductorError", "CppCompileError: C++ compile error", origin="compile",
                               traceback=""), category=Category.KERNEL_FAILURE)
    assert caught_compile_failure((asserted, compiled)) is compiled
    assert caught_compile_failure((compiled, asserted)) is None  # the run ended on the compiler's own failure
    broke = replace(compiled, category=Category.GRAPH_BREAK)
    assert caught_compile_failure((asserted, broke)) is None  # a graph break is no compiler failure


def test_run_says_the_compile_failure_the_script_caught(tmp_path):
    from clihelp import pt2doctor

    run = pt2doctor("run", "--json", "--out", str(tmp_path), str(Path(__file__).parents[1] / "diagnose" / "scripts"
                                                                   / "caught_compile_error.py"))
    verdict = run.doc["verdict"]
    assert run.code == 1 and verdict["category"] == "kernel_failure", verdict
    assert "(the script caught it and reported AssertionError: compiled f does not match eager" in verdict["headline"]


def test_a_backward_compile_that_failed_at_backward_is_a_compile_failure_caught_or_not(tmp_path):
    """The trace's `bwd_compilation_metrics` says a backward graph's compile failed; where the script caught it and
    exited 1 the run's failure was "exit status 1", unclassified (pytorch#145208 on the H200 was then concluded
    'fix your script first'). Uncaught, it stays the failure the graph raised."""
    from clihelp import pt2doctor

    script = Path(__file__).parents[1] / "diagnose" / "scripts" / "caught_backward_compile_error.py"
    caught = pt2doctor("run", "--json", "--out", str(tmp_path / "caught"), str(script))
    failures = caught.doc["failures"]
    assert caught.code == 1 and [(f["origin"], f["category"]) for f in failures] == [
        ("backward_compile", "backend_failure")], failures
    assert failures[0]["message"] == "backward lowering failed" and caught.doc["verdict"]["category"] == \
        "backend_failure"
    raised = pt2doctor("run", "--json", "--out", str(tmp_path / "raised"), str(script), "raise")
    assert [(f["origin"], f["category"]) for f in raised.doc["failures"]] == [("graph", "backend_failure")]

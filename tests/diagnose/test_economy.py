"""The run economy's pieces (issue #38) on hand-built values: the run ledger, the stage ladder judged on a graph's
runs, the verdict said as soon as it is known, and the checkpoint that writes the diagnosis so far. The real runs
are in tests/diagnose/test_diagnose.py (a custom backend's stage found on its graph, no stage run of the program)
and tests/e2e/test_interrupt.py (SIGTERM, --budget)."""

from __future__ import annotations

import subprocess
import sys

from pt2doctor.diagnose.checkpoint import Checkpoint
from pt2doctor.diagnose.conclusions import verdict_words
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.frozen import freeze
from pt2doctor.diagnose.graph_stages import _judge
from pt2doctor.diagnose.ledger import run_ledger
from pt2doctor.diagnose.reported import HandOver
from pt2doctor.diagnose.runs import RunMade
from pt2doctor.model import Category
from pt2doctor.model.diagnosis import Bisection, Diagnosis, FailingStage, RunLedger, StepRuns
from pt2doctor.model.minify import FailureKind, FailureSignature, MinifyResult, Stage, VerifyRuns
from pt2doctor.processes.pool import RunResult

BACKENDS = ["eager", "aot_eager", "aot_eager_decomp_partition", "picky_backend"]
REFUSED = FailureSignature(FailureKind.EXCEPTION, "NotImplementedError: picky_backend refuses sigmoid")


def _fails(text: str = "NotImplementedError: picky_backend refuses sigmoid") -> RunResult:
    return RunResult("failed", text)


def test_the_ladder_on_a_graph_decides_when_the_top_fails_as_the_program_did_and_the_rest_pass():
    ladder = _judge("g0000", BACKENDS, [RunResult("ok")] * 3 + [_fails()], REFUSED)
    assert ladder.conclusive and ladder.queries == 4
    assert ladder.outcomes == {"eager": "pass", "aot_eager": "pass", "aot_eager_decomp_partition": "pass",
                               "picky_backend": "fail"}


def test_a_lower_rung_that_fails_the_same_way_is_the_stage():
    ladder = _judge("g0000", BACKENDS, [RunResult("ok"), _fails(), _fails(), _fails()], REFUSED)
    assert ladder.conclusive and ladder.outcomes["aot_eager"] == "fail"


def test_the_ladder_does_not_decide_when_the_graph_alone_does_not_fail_as_the_program_did():
    passes = _judge("g0000", BACKENDS, [RunResult("ok")] * 4, REFUSED)
    assert not passes.conclusive and "does not fail as the program did (passes)" in passes.why
    other = _judge("g0000", BACKENDS, [RunResult("ok")] * 3 + [_fails("RuntimeError: something else")], REFUSED)
    assert not other.conclusive


def test_the_ladder_does_not_decide_when_a_lower_rung_fails_otherwise_or_eager_fails():
    otherwise = _judge("g0000", BACKENDS, [RunResult("ok"), _fails("RuntimeError: x"), RunResult("ok"), _fails()],
                       REFUSED)
    assert not otherwise.conclusive and "'aot_eager' fails otherwise" in otherwise.why
    invalid = _judge("g0000", BACKENDS, [_fails("InvalidRepro: eager run fails: X")] + [_fails()] * 3, REFUSED)
    assert not invalid.conclusive
    timeout = _judge("g0000", BACKENDS, [RunResult("timeout")] + [RunResult("ok")] * 2 + [_fails()], REFUSED)
    assert not timeout.conclusive and "did not finish in time" in timeout.why


def test_a_wrapped_failure_recorded_without_a_signature_takes_the_graphs_own():
    """Inductor's compile workers wrap the real error (`SubprocException`): the graph alone says what failed."""
    ladder = _judge("g0001", ["eager", "inductor"], [RunResult("ok"), _fails("CppCompileError: x")], None)
    assert ladder.conclusive and ladder.outcomes == {"eager": "pass", "inductor": "fail"}


def test_a_signal_death_is_judged_by_its_signal():
    segv = FailureSignature(FailureKind.SIGNAL, "SIGSEGV")
    ladder = _judge("g0000", ["eager", "inductor"], [RunResult("ok"), RunResult("signal", "11")], segv)
    assert ladder.conclusive


def _minify(queries: int = 30) -> MinifyResult:
    return MinifyResult(graph="g0001", stage=Stage.AOT, signature=REFUSED, nodes_before=9, nodes_after=1, ops=("x",),
                        culprit_ops=("x",), queries=queries, cache_hits=0, time_s=1.0, verified=True,
                        repro_path="repro.py", verify_runs=VerifyRuns(2, 2))


def test_the_ledger_counts_every_whole_program_run_by_the_step_that_asked_for_it_stopped_ones_too():
    found = Found(command=("x.py",), minify=_minify())
    hand_over = HandOver(bisection=Bisection("inductor", "lowerings", queries=7))
    found.timings.update({"reproduce": 5.0, "stage_evidence": 1.0, "minify_early": 9.0, "hand_over": 8.0})
    made = [RunMade("reproduce", "original-1", 5.0, True), RunMade("reproduce", "original-2", 4.5, True),
            RunMade("workarounds", "workaround-call", 6.0, True), RunMade("stages", "aot_eager", 2.0, False)]
    ledger = run_ledger(made, found, ladder_queries=4, hand_over=hand_over)
    assert (ledger.whole, ledger.whole_s, ledger.checks, ledger.graph) == (4, 17.5, 0, 4 + 30 + 2 + 7)
    by_step = {s.step: s for s in ledger.steps}
    assert by_step["reproduce"] == StepRuns("reproduce", whole=2, whole_s=9.5)
    assert by_step["stages"].whole == 1  # stopped as no longer needed: its seconds were spent all the same
    assert by_step["stage_evidence"].graph == 4 and by_step["minify_early"].graph == 32
    # in the order the steps ran
    assert [s.step for s in ledger.steps][:3] == ["reproduce", "stage_evidence", "minify_early"]
    assert ledger.describe().startswith("4 whole-program runs (reproduce 2, ")


def test_the_ledger_in_words_names_what_a_diagnosis_without_graph_runs_cost():
    ledger = RunLedger.of((StepRuns("reproduce", 2, 9.5), StepRuns("program_reduction", checks=160, graph=2)))
    assert ledger.describe() == ("2 whole-program runs (reproduce 2; 9.5 s of runs), 160 program checks in warm "
                                 "workers, 2 graph-level runs")


def test_the_verdict_is_said_once_the_stage_is_known_and_refined_as_the_end_would_refine_it():
    found = Found(command=("x.py",), category=Category.USER_ERROR, error="AssertionError: wrong")
    assert verdict_words(found) is None  # no stage yet
    found.stage = FailingStage.INDUCTOR
    assert verdict_words(found) == "accuracy in Inductor (lowering / codegen): AssertionError: wrong"


def test_at_the_dynamo_stage_the_verdict_waits_for_the_run_with_compilation_off():
    found = Found(command=("x.py",), category=Category.BACKEND_FAILURE, stage=FailingStage.DYNAMO, error="E: x")
    assert verdict_words(found) is None
    found.timings["compilation_off"] = 3.0
    assert verdict_words(found) == "dynamo_internal in Dynamo (graph capture): E: x"
    off = Found(command=("x.py",), category=Category.USER_ERROR, error="ValueError: bad",
                timings={"compilation_off": 1.0})
    assert verdict_words(off) == "user_error: the script fails with compilation off too: ValueError: bad"


class _Runner:
    made: list[RunMade] = [RunMade("reproduce", "original-1", 3.0, True)]


class _Said:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def status(self, text: str) -> None:
        self.lines.append(text)


def test_the_checkpoint_writes_the_diagnosis_so_far_with_the_steps_to_come_and_says_the_verdict_once():
    found = Found(command=("x.py",), category=Category.KERNEL_FAILURE, error="CppCompileError: x")
    written: list[Diagnosis] = []
    said = _Said()
    checkpoint = Checkpoint(found, _Runner(), {}, ["reproduce", "stage_evidence", "minify", "conclude"],  # type: ignore[arg-type]
                            said, written.append)
    checkpoint("reproduce")
    found.stage = FailingStage.INDUCTOR
    checkpoint("stage_evidence")
    checkpoint("minify")
    assert [d.pending for d in written] == [("stage_evidence", "minify", "conclude"), ("minify", "conclude"),
                                            ("conclude",)]
    assert written[1].stage is FailingStage.INDUCTOR and written[1].runs is not None and written[1].runs.whole == 1
    assert [line for line in said.lines if line.startswith("verdict: ")] == [
        "verdict: kernel_failure in Inductor (lowering / codegen): CppCompileError: x (what follows is the hand-over: "
        "repro, workarounds)"]
    assert checkpoint.frozen().pending == ()


def test_a_stop_of_the_diagnosis_exits_as_a_shell_reports_the_signal():
    for why, code in (("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129)):
        found = Found(command=("x.py",), category=Category.KERNEL_FAILURE, stopped_by=why)
        assert found.interrupted and freeze(found).exit_code == code
    budget = Found(command=("x.py",), category=Category.KERNEL_FAILURE, stopped_by="budget")
    assert not budget.interrupted and freeze(budget).exit_code == 1
    # its budget ran out before the failure was reproduced: not "nothing fails" (0), as coreutils' `timeout` exits
    assert freeze(Found(command=("x.py",), stopped_by="budget")).exit_code == 124


def test_the_diagnose_command_starts_its_first_run_before_the_parent_imports_torch():
    """`import torch` takes seconds on a few cores: the parent imports it beside the first run of the script, not
    before it (a type-only import of the minifier's graph class once made every diagnosis start 2-3 s late)."""
    modules = ("pt2doctor.cli.diagnose", "pt2doctor.diagnose.procedure", "pt2doctor.diagnose.stopping",
               "pt2doctor.capture.run_lock", "pt2doctor.capture.report_inputs", "pt2doctor.report.issue")
    code = f"import sys\nfor m in {modules!r}: __import__(m)\nprint(sorted(m for m in sys.modules if m == 'torch'))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"


# A backend whose compiled forward adds one: the script's own check (an assert) sees a wrong value.
WRONG_BY_ONE = """
import torch
from torch._dynamo.backends.common import aot_autograd

def off_by_one(gm, example_inputs):
    return lambda *args: [o + 1 for o in gm(*args)]

def f(x):
    return x.sin() * 2

x = torch.randn(8)
compiled = torch.compile(f, backend=aot_autograd(fw_compiler=off_by_one))(x)
assert torch.equal(compiled, f(x)), "compiled and eager differ"
"""


def test_the_scripts_own_check_with_a_graph_judged_wrong_is_a_wrong_result_before_any_stage_run(tmp_path):
    """The first run judged the compiled graph wrong against eager on the program's values: the script's assert is
    a wrong result its check found (no three runs of the program to learn it); an assert with no graph judged
    wrong stays the script's own error until the stage runs say otherwise."""
    from pt2doctor.capture.recorded_run import record_script
    from pt2doctor.diagnose.reproduce import _judged_wrong

    for name, text, category in (("wrong.py", WRONG_BY_ONE, Category.ACCURACY),
                                 ("right.py", WRONG_BY_ONE.replace("[o + 1 for", "[o for"), Category.USER_ERROR)):
        script = tmp_path / name
        script.write_text(text if category is Category.ACCURACY else text.replace("torch.equal(compiled, f(x))",
                                                                                    "False"))
        run_dir = tmp_path / f"run-{name}"
        assert record_script(script, run_dir, accuracy_tolerance=1e-4) == 1
        found = Found(command=("python", name), category=Category.USER_ERROR,
                      error="AssertionError: compiled and eager differ")
        _judged_wrong(run_dir, found)
        assert found.category is category, found.notes
        assert bool(found.notes) is (category is Category.ACCURACY)

"""A wrong result is minified from the graph the program's own check depends on (`diagnose.wrong_graph`):
several graphs miscompiled, only one of them checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from pt2doctor.capture.child.graph_recorder import record_script
from pt2doctor.diagnose.runs import ScriptCall, Variant, VariantRunner
from pt2doctor.model.recording import read_failures

SCRIPT = Path(__file__).parent / "scripts" / "two_miscompiled_ops.py"


def test_the_extra_runs_ask_the_childs_recorder_for_the_check_and_the_eager_graph(tmp_path):
    runner = VariantRunner(ScriptCall(Path("user.py"), (), tmp_path, None), 1, reporter=None)  # type: ignore[arg-type]
    try:
        check = runner.options(Variant.accuracy_check(1e-4))
        eager = runner.options(Variant.graph_run_eagerly("1/0"))
    finally:
        runner.close()
    assert check.record_graphs and check.hooks.record_accuracy_tolerance == 1e-4 and not check.hooks.record_run_eagerly
    assert check.out_dir == tmp_path / "runs" / "accuracy-check"
    assert eager.record_graphs and eager.hooks.record_run_eagerly == ("1/0",) and eager.label == "eager-1-0"
    assert eager.hooks.record_accuracy_tolerance is None


@pytest.mark.slow
def test_a_graph_run_eagerly_skips_its_backend_and_the_others_are_still_judged(tmp_path):
    # the checked function's graph (compile id 0/0) run as captured: the program's check passes, and the
    # accuracy check still rejects the other graph (the planted log1p bug), whose result is only printed
    assert record_script(SCRIPT, tmp_path / "run", accuracy_tolerance=1e-4, run_eagerly=("0/0",)) == 0
    # g0000 ran as captured, so it has no after-AOT graph g0001: the second function's graph is g0001
    assert {f.graph for f in read_failures(tmp_path / "run" / "graphs") if f.phase == "accuracy"} == {"g0001"}


@pytest.mark.slow
def test_of_two_miscompiled_ops_the_one_the_program_checks_is_minified(diagnosed):
    run, d = diagnosed(SCRIPT)
    assert (d["category"], d["stage"]) == ("accuracy", "inductor")
    assert d["repro_verified"] and d["culprit_ops"] == ["aten.relu.default"], d["notes"]
    assert any("judged several graphs wrong" in note and "g0000 is minified" in note for note in d["notes"])
    assert (run.out_dir / "runs" / "eager-0-0").is_dir() and (run.out_dir / "runs" / "eager-1-0").is_dir()
    # the extra runs are the diagnosis's own variant runs: listed in its attempts, with their progress lines
    attempts = {a["label"]: a for a in d["attempts"]}
    assert {"accuracy-check", "eager-0-0", "eager-1-0"} <= set(attempts), sorted(attempts)
    assert attempts["eager-0-0"]["outcome"] == "pass" and attempts["accuracy-check"]["outcome"] == "fail"
    assert "run accuracy-check: started" in run.stderr


RESET_SCRIPT = Path(__file__).parent / "scripts" / "wrong_after_reset.py"


@pytest.mark.slow
def test_two_wrong_graphs_with_one_torch_compile_id_across_a_reset_each_get_their_own_run(diagnosed):
    """Issue #30: torch numbers the graphs 0/0 before and after `torch._dynamo.reset()`; each gets its own
    eager run (`runs/eager-0-0`, `runs/eager-0-0@1`), and the second, the one the program checks, is minified."""
    run, d = diagnosed(RESET_SCRIPT)
    assert run.code == 1, run.stderr[-3000:]
    assert d["category"] == "accuracy", d["notes"]
    attempts = {a["label"]: a for a in d["attempts"]}
    assert {"eager-0-0", "eager-0-0@1"} <= set(attempts), sorted(attempts)
    assert attempts["eager-0-0@1"]["outcome"] == "pass" and attempts["eager-0-0"]["outcome"] == "fail"
    assert any("judged several graphs wrong" in note and "(compile id 0/0@1)" in note for note in d["notes"]), d["notes"]

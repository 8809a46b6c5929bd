"""A wrong result is minified from the graph the program's own check depends on (`diagnose.wrong_graph`):
several graphs miscompiled, only one of them checked."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace

import pytest

from pt2doctor.capture.recorded_run import record_script
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.runs import ScriptCall, VariantRunner
from pt2doctor.diagnose.variants import Variant
from pt2doctor.diagnose.wrong_graph import _graph_the_check_depends_on
from pt2doctor.model.diagnosis import Attempt
from pt2doctor.model.minify import Stage
from pt2doctor.model.recording import GraphEntry, read_failures
from pt2doctor.model.serialize import dumps

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
    assert any("judged several graphs wrong" in note and "(compile id 0/0@1)" in note
               for note in d["notes"]), d["notes"]


class _Runner:
    """A `VariantRunner` stand-in: keeps the labels it was asked to run; the run of `passing` passes."""

    def __init__(self, passing: str) -> None:
        self.passing, self.labels = passing, []
        self.reporter = SimpleNamespace(status=lambda text: None)

    def submit(self, variant: Variant) -> Future:
        self.labels.append(variant.label)
        future: Future = Future()
        outcome = "pass" if variant.label == self.passing else "fail"
        future.set_result(Attempt(variant.label, None, outcome, None, None, 0, 0.0, ""))
        return future


def test_a_forward_and_its_backward_both_judged_wrong_share_one_eager_run(tmp_path):
    """Two rejected graphs of one compile (an after-AOT forward and its backward) are one experiment: running
    their Dynamo graph as captured; two runs of one directory would stop the diagnosis (issue #30)."""
    (tmp_path / "graphs").mkdir()
    entries = [GraphEntry("g0000", Stage.DYNAMO, "0/0"), GraphEntry("g0001", Stage.AOT, "0/0", parent="g0000"),
               GraphEntry("g0002", Stage.AOT, "0/0", parent="g0000"), GraphEntry("g0003", Stage.DYNAMO, "0/0@1")]
    (tmp_path / "graphs" / "index.jsonl").write_text("".join(dumps(e).decode() + "\n" for e in entries))
    runner, found = _Runner("eager-0-0@1"), Found(command=())
    assert _graph_the_check_depends_on(runner, tmp_path, ["g0001", "g0002", "g0003"], found) == "g0003"  # type: ignore[arg-type]
    assert runner.labels == ["eager-0-0", "eager-0-0@1"]

"""A wrong result is minified from the graph the program's own check depends on (`diagnose.wrong_graph`):
several graphs miscompiled, only one of them checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from pt2doctor.capture.child.graph_recorder import record_script
from pt2doctor.model.recording import read_failures

SCRIPT = Path(__file__).parent / "scripts" / "two_miscompiled_ops.py"


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

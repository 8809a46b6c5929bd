"""`pt2doctor demo` (the README's first command) runs every example and ends with a diagnosis."""

from __future__ import annotations

import json

import pytest
from clihelp import pt2doctor


@pytest.mark.slow
def test_demo_runs_the_examples_and_diagnoses_the_failing_one(tmp_path):
    run = pt2doctor("demo", "--out", str(tmp_path), timeout=900)
    assert run.code == 0, run.stderr[-3000:]
    for name in ("toy_example", "recompiles", "custom_backend_failure"):
        assert (tmp_path / name / "session.json").exists()
    d = json.loads((tmp_path / "diagnose" / "diagnosis.json").read_text())
    assert d["stage"] == "backend" and d["culprit_ops"] == ["torch.relu"] and d["repro_verified"]
    assert (tmp_path / "diagnose" / "issue.md").exists()

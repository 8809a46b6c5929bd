"""What-if, verified by re-running real scripts: one fix that works, one that does not, and the HF model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parent / "scripts"


def cli(*args: str) -> tuple[int, dict]:
    env = {k: v for k, v in os.environ.items() if k != "TORCH_TRACE"}
    proc = subprocess.run([sys.executable, "-m", "pt2doctor", *args], capture_output=True, text=True, env=env,
                          timeout=600)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout)


def test_capture_scalar_outputs_removes_the_item_break_verified(tmp_path: Path) -> None:
    code, doc = cli("explain", "--try-fixes", "--json", "--out", str(tmp_path), str(SCRIPTS / "whatif_item.py"))
    assert code == 0
    assert doc["explain"][0]["where"]["line"] == 6
    (trial,) = [t for t in doc["trials"] if t["trial"]["name"] == "item"]
    assert trial["outcome"] == "verified" and trial["outputs_equal"] is True
    assert trial["before"]["graph_breaks"] > 0 and trial["after"]["graph_breaks"] == 0


def test_a_suggestion_that_does_not_help_is_refuted(tmp_path: Path) -> None:
    code, doc = cli("explain", "--try-fixes", "--json", "--out", str(tmp_path), str(SCRIPTS / "whatif_refuted.py"))
    assert code == 0
    (trial,) = [t for t in doc["trials"] if t["trial"]["name"] == "item"]
    assert trial["outcome"] == "refuted" and "did not go down" in trial["why"]


@pytest.mark.slow
def test_hf_model_names_input_ids_dim_1_and_mark_dynamic_is_verified(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    code, doc = cli("recompiles", "--try-fixes", "--json", "--out", str(tmp_path), str(SCRIPTS / "hf_seqlen.py"))
    assert code == 0
    (chain,) = doc["recompiles"]
    causes = [s["cause"] for s in chain["steps"]]
    assert len(causes) == 3 and all(c["subject"] == "input_ids" and c["dim"] == 1 for c in causes)
    trials = {t["trial"]["name"]: t for t in doc["trials"]}
    assert trials["mark_dynamic"]["outcome"] == "verified" and trials["mark_dynamic"]["outputs_equal"] is True
    assert trials["mark_dynamic"]["after"]["recompiles"] == 0


@pytest.mark.slow
def test_run_cold_compares_cold_and_warm_compile_time(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TORCH_TRACE"}
    proc = subprocess.run([sys.executable, "-m", "pt2doctor", "run", "--cold", "--out", str(tmp_path),
                           str(SCRIPTS / "whatif_item.py")], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Cold compile (caches off)" in proc.stdout and (tmp_path / "cold" / "session.json").exists()

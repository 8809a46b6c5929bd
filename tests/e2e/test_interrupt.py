"""Ctrl-C: `run` and `diagnose` stop the script's whole process group, keep what they found, exit 130."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from clihelp import SCRIPTS


def _interrupt_when(command: list[str], *ready: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Ctrl-C `pt2doctor COMMAND` once every `ready` path exists."""
    env = {k: v for k, v in os.environ.items() if k != "TORCH_TRACE"}
    proc = subprocess.Popen([sys.executable, "-m", "pt2doctor", *command], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + timeout
    while not all(p.exists() for p in ready) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    time.sleep(1.0)  # the hang loop is entered right after the marker is written
    proc.send_signal(signal.SIGINT)  # what the terminal sends pt2doctor on Ctrl-C
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_run_ctrl_c_writes_the_session_and_exits_130(tmp_path):
    out = tmp_path / "run"
    # hang.py compiles, then loops forever: the child.json sidecar exists once the script started
    done = _interrupt_when(["run", "--out", str(out), str(SCRIPTS / "hang.py")], out / "trace")
    assert done.returncode == 130, done.stderr[-2000:]
    session = json.loads((out / "session.json").read_text())
    assert session["exit"]["interrupted"] is True
    assert session["compiles"], "what was traced before Ctrl-C is kept"
    (failure,) = session["failures"]  # our Ctrl-C is not the script's error
    assert failure["origin"] == "interrupt" and failure["category"] != "user_error"
    assert failure["file"] == str(SCRIPTS / "hang.py")
    assert "Traceback" not in done.stderr.split("KeyboardInterrupt")[0][-200:]


def test_diagnose_ctrl_c_keeps_the_partial_diagnosis(tmp_path):
    out = tmp_path / "diag"
    done = _interrupt_when(["diagnose", "--out", str(out), str(SCRIPTS / "hang.py")],
                           out / "runs" / "original-1" / "trace")
    assert done.returncode == 130, done.stderr[-2000:]
    d = json.loads((out / "diagnosis.json").read_text())
    assert d["interrupted"] is True and d["exit_code"] == 130
    assert "total" in d["timings"]


def test_diagnose_ctrl_c_after_the_stage_runs_keeps_the_stage_table_and_writes_issue_md(tmp_path):
    out = tmp_path / "diag"
    done = _interrupt_when(["diagnose", "--no-bisect", "--out", str(out), str(SCRIPTS / "slow_backend_failure.py")],
                           # the stage runs start with the two runs that reproduce the failure; on many cores
                           # they can end first
                           *(out / "runs" / run / "session.json" for run in ("original-1", "original-2",
                                                                             "aot_eager_decomp_partition")),
                           timeout=240)
    assert done.returncode == 130, done.stderr[-2000:]
    d = json.loads((out / "diagnosis.json").read_text())
    assert d["interrupted"] is True and d["headline"].startswith("interrupted (Ctrl-C): backend_failure")
    assert d["stages"]["eager"] == "pass" and d["stages"]["aot_eager"] == "pass"
    assert d["stage"] == "backend" and (out / "issue.md").exists()

"""Ctrl-C: `run` and `diagnose` stop the script's whole process group, keep what they found, exit 130; SIGTERM and
`--budget` stop `diagnose` the same way (143; the budget concludes on what was found)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from clihelp import SCRIPTS


def _interrupt_when(command: list[str], *ready: Path, timeout: float = 120, sig: int = signal.SIGINT,
                    until: Callable[[], bool] | None = None) -> subprocess.CompletedProcess[str]:
    """Send `sig` (Ctrl-C's SIGINT by default) to `pt2doctor COMMAND` once every `ready` path exists and `until`
    holds."""
    env = {k: v for k, v in os.environ.items() if k != "TORCH_TRACE"}
    proc = subprocess.Popen([sys.executable, "-m", "pt2doctor", *command], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + timeout
    while (not all(p.exists() for p in ready) or (until is not None and not until())) and (
            time.monotonic() < deadline and proc.poll() is None):
        time.sleep(0.2)
    time.sleep(1.0)  # the hang loop is entered right after the marker is written
    proc.send_signal(sig)  # what the terminal sends pt2doctor on Ctrl-C; a scheduler's SIGTERM
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _verdict_written(out: Path) -> Callable[[], bool]:
    """diagnosis.json, written as the diagnosis goes, has the stage: the verdict is known, the hand-over follows."""
    def known() -> bool:
        try:
            d = json.loads((out / "diagnosis.json").read_text())
        except (OSError, ValueError):
            return False
        return d["stage"] is not None and bool(d["pending"])
    return known


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


@pytest.mark.slow  # a whole diagnosis of its own (30-80 s): the default run stays under 20 min
def test_diagnose_ctrl_c_after_the_verdict_keeps_the_stage_table_and_writes_issue_md(tmp_path):
    out = tmp_path / "diag"
    # slow_backend's four seconds a compile: the Ctrl-C lands while the minifier works on the graph
    done = _interrupt_when(["diagnose", "--no-bisect", "--out", str(out), str(SCRIPTS / "slow_backend_failure.py")],
                           until=_verdict_written(out), timeout=240)
    assert done.returncode == 130, done.stderr[-2000:]
    d = json.loads((out / "diagnosis.json").read_text())
    assert d["interrupted"] is True and d["stopped_by"] == "SIGINT" and d["pending"] == []
    assert d["headline"].startswith("interrupted (Ctrl-C): backend_failure")
    assert d["stages"]["eager"] == "pass" and d["stages"]["aot_eager"] == "pass"
    assert d["stage"] == "backend" and (out / "issue.md").exists()
    assert "verdict: backend_failure in the custom backend" in done.stderr


def test_diagnose_stopped_by_sigterm_writes_what_it_found_and_says_so(tmp_path):
    """A CI job's limit or a scheduler's preemption: SIGTERM stops it as Ctrl-C does, with 128 + 15."""
    out = tmp_path / "diag"
    done = _interrupt_when(["diagnose", "--no-bisect", "--out", str(out), str(SCRIPTS / "slow_backend_failure.py")],
                           until=_verdict_written(out), timeout=240, sig=signal.SIGTERM)
    assert done.returncode == 143, done.stderr[-2000:]
    d = json.loads((out / "diagnosis.json").read_text())
    assert d["stopped_by"] == "SIGTERM" and d["interrupted"] is True and d["exit_code"] == 143
    assert d["headline"].startswith("stopped (SIGTERM): backend_failure in the custom backend")
    assert d["runs"]["whole"] >= 2 and d["runs"]["steps"][0]["step"] == "reproduce"
    assert "Traceback" not in done.stderr


def test_diagnose_stopped_by_sigterm_during_the_first_runs_says_it_was_stopped(tmp_path):
    out = tmp_path / "diag"
    done = _interrupt_when(["diagnose", "--out", str(out), str(SCRIPTS / "hang.py")],
                           out / "runs" / "original-1" / "trace", sig=signal.SIGTERM)
    assert done.returncode == 143, done.stderr[-2000:]
    d = json.loads((out / "diagnosis.json").read_text())
    assert d["stopped_by"] == "SIGTERM"
    assert d["headline"] == "stopped (SIGTERM) before the script's failure was reproduced"


def test_diagnose_budget_hands_over_the_best_found_within_it(tmp_path):
    """--budget 35 on a backend that fails the program's graph at once and waits a minute on any smaller one: the
    first run and the stage's evidence take what the interpreters take (about 10 s alone, 25 s on a loaded CI
    machine), the minifier cannot finish, the verdict is handed over and the diagnosis ends within 10% of the
    budget, exiting as a concluded diagnosis does. (On a backend that waited on every compile, the first run took 24 s
    on a loaded CI machine and the budget ended the diagnosis before the stage was known.)"""
    out, budget = tmp_path / "diag", 35
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pt2doctor", "diagnose", "--no-bisect", "--budget", str(budget),
                           "--out", str(out), str(SCRIPTS / "slow_minifier_failure.py")], capture_output=True,
                          text=True, timeout=300)
    took = time.monotonic() - started
    d = json.loads((out / "diagnosis.json").read_text())
    # the diagnosis's own time within 10%; the command's (interpreter start, ending the runs and the bundle included,
    # on a test machine running other tests beside it) within 10 s more
    total = d["timings"].get("total")  # none: the command ended before its own end (its stderr says how)
    assert total is not None and total <= budget * 1.1 and took <= budget + 10, (took, d["timings"],
                                                                                  done.stderr[-3000:])
    assert d["category"] == "backend_failure" and d["stage"] == "backend"
    assert done.returncode == 1 and d["exit_code"] == 1 and d["interrupted"] is False
    assert d["stopped_by"] == "budget" and d["headline"].startswith("stopped at its --budget: backend_failure")

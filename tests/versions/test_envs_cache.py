"""The cache of torch environments and its limits (issue 29): a finished environment is reused as it is, a
partial one is never used, an install does not start on a low disk or a spent budget, pip never runs in
the interpreter pt2doctor runs in, and the cache can be cleared (here and through the CLI)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from clihelp import pt2doctor

from pt2doctor.capture.runner import SilentReporter
from pt2doctor.model.serialize import write_record
from pt2doctor.model.versions import TorchEnv
from pt2doctor.processes.program_run import Finished
from pt2doctor.versions.torch_envs import (
    ENV_RECORD,
    CannotRun,
    Limits,
    OutOfBudget,
    _pip_result,
    _refuse_user_prefix,
    clear_cache,
    ensure_env,
    given_env,
)

PY = f"py{sys.version_info[0]}{sys.version_info[1]}"
ROOMY = Limits(deadline=None, min_free_bytes=0)


def _made(cache: Path, name: str) -> Path:
    env = cache / PY / name
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").write_text("")
    write_record(env / ENV_RECORD, TorchEnv("2.14.1", "torch==2.14.1", "2.14.1+cu130", "13.0", "3.11.7", 158.0))
    return env


def test_a_finished_environment_is_reused_without_running_anything(tmp_path):
    env = _made(tmp_path, "torch-2.14.1")
    python, record, made = ensure_env(tmp_path, "2.14.1", "torch==2.14.1", ROOMY, SilentReporter(), tmp_path / "logs")
    assert python == str(env / "bin" / "python") and record.torch == "2.14.1+cu130" and not made
    assert not (tmp_path / "logs").exists()


def test_an_install_does_not_start_on_a_low_disk_or_after_the_budget(tmp_path):
    partial = tmp_path / PY / "torch-2.14.0"
    partial.mkdir(parents=True)  # an install stopped half-way: no record
    low_disk = Limits(deadline=None, min_free_bytes=1 << 60)
    with pytest.raises(OutOfBudget, match="below the .* GB kept free"):
        ensure_env(tmp_path, "2.14.0", "torch==2.14.0", low_disk, SilentReporter(), tmp_path / "logs")
    spent = Limits(deadline=time.monotonic() - 1, min_free_bytes=0)
    with pytest.raises(OutOfBudget, match="time budget ran out"):
        ensure_env(tmp_path, "2.14.0", "torch==2.14.0", spent, SilentReporter(), tmp_path / "logs")
    assert not (partial / ENV_RECORD).exists()


def test_pip_never_runs_in_the_interpreter_pt2doctor_runs_in():
    with pytest.raises(CannotRun, match="not an environment pt2doctor made"):
        _refuse_user_prefix(Path(sys.prefix))


def test_a_given_environment_must_hold_a_python(tmp_path):
    with pytest.raises(CannotRun, match="not a virtual environment"):
        given_env(tmp_path)
    assert given_env(Path(sys.prefix)) == str(Path(sys.prefix) / "bin" / "python")


def test_clearing_the_cache_removes_every_environment_and_counts_the_bytes(tmp_path):
    _made(tmp_path, "torch-2.14.1")
    freed = clear_cache(tmp_path)
    assert freed > 0 and list(tmp_path.iterdir()) == []
    assert clear_cache(tmp_path / "never-made") == 0


def test_the_cli_clears_the_cache_it_is_given_and_refuses_a_malformed_environment(tmp_path):
    _made(tmp_path / "cache", "torch-2.14.1")
    run = pt2doctor("versions", "--clear-cache", "--versions-cache", str(tmp_path / "cache"))
    assert run.code == 0 and "cleared" in run.stdout and list((tmp_path / "cache").iterdir()) == []  # the summary
    script = tmp_path / "repro.py"
    script.write_text("")
    bad = pt2doctor("versions", "--torch-env", "2.14.1", str(script))
    assert bad.code == 64 and "VERSION=PATH" in bad.stderr


def test_a_repro_that_passes_under_your_torch_ends_the_search_at_once(tmp_path):
    script = tmp_path / "repro.py"
    script.write_text("import torch\nprint(torch.ones(2).sum().item())\n")
    run = pt2doctor("versions", "--out", str(tmp_path / "out"), "--versions-cache", str(tmp_path / "cache"),
                    str(script))
    assert run.code == 2 and "passes under your torch" in run.stdout, run.stdout[-2000:]  # the summary, on stdout
    assert not (tmp_path / "cache").exists()  # nothing listed, nothing installed


def test_pips_own_words_say_why_a_release_cannot_be_installed():
    """pip's real output (this machine, 2026-11-26) for a release a pip constraint excludes."""
    fixtures = Path(__file__).parents[1] / "fixtures" / "versions"
    ran = Finished(1, (fixtures / "pip-install-2.15.0.stdout.txt").read_text(),
                   (fixtures / "pip-install-2.15.0.stderr.txt").read_text(), 6.0)
    with pytest.raises(CannotRun) as raised:
        _pip_result(ran, "torch==2.15.0")
    assert str(raised.value) == ("pip could not install torch==2.15.0: Cannot install torch==2.15.0 because these "
                                 "package versions have conflicting dependencies. (The user requested (constraint) "
                                 "torch<=2.14.1)")

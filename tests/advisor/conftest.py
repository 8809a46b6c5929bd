"""Advisor fixtures: each real script runs once per test session (torch 2.13 CPU, backend="eager")."""

from __future__ import annotations

from pathlib import Path

import pytest

from pt2doctor.capture.runner import RunOptions, run_script
from pt2doctor.model import Session
from pt2doctor.report.document import build_report

SCRIPTS = Path(__file__).parent / "scripts"


def run(name: str, out: Path) -> Session:
    session = run_script(RunOptions(script=SCRIPTS / name, out_dir=out, timeout_s=240))
    return build_report(session).session


@pytest.fixture(scope="session")
def recompile_session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    return run("recompile_causes.py", tmp_path_factory.mktemp("recompile_causes"))


@pytest.fixture(scope="session")
def break_session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    return run("break_causes.py", tmp_path_factory.mktemp("break_causes"))


@pytest.fixture(scope="session")
def value_session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    return run("recompile_values.py", tmp_path_factory.mktemp("recompile_values"))

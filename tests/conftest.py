"""Shared fixtures: each planted script runs once per test session, through the real CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from clihelp import SCRIPTS, CliRun, pt2doctor

from pt2doctor.model.settings import STRICT

os.environ.setdefault(STRICT, "1")  # pt2doctor's own errors fail the test, in this process and the CLI's


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked `gpu` runs only where torch sees a CUDA device."""
    if item.get_closest_marker("gpu") is not None:
        torch = pytest.importorskip("torch")
        if not torch.cuda.is_available():
            pytest.skip("needs a CUDA device")


@pytest.fixture(scope="session")
def run_json(tmp_path_factory: pytest.TempPathFactory):
    """`pt2doctor run --json` on a planted script, once per session per (script, extra args)."""
    cache: dict[tuple[str, ...], CliRun] = {}

    def get(script: str, *extra: str) -> CliRun:
        key = (script, *extra)
        if key not in cache:
            out = tmp_path_factory.mktemp(Path(script).stem)
            cache[key] = pt2doctor("run", "--json", "--out", str(out), *extra, str(SCRIPTS / script))
        return cache[key]

    return get


@pytest.fixture(scope="session")
def diagnosed(tmp_path_factory: pytest.TempPathFactory):
    """`pt2doctor diagnose` on a script, once per session per (script, options, args): (run, diagnosis.json)."""
    cache: dict[tuple[str, ...], tuple[CliRun, dict]] = {}

    def get(script: Path, *args: str, options: tuple[str, ...] = ()) -> tuple[CliRun, dict]:
        key = (str(script), *options, "--", *args)
        if key not in cache:
            out = tmp_path_factory.mktemp(script.stem)
            # a relative --out, as users type it: every path diagnose hands on must still resolve
            run = pt2doctor("diagnose", "--out", "bundle", *options, str(script), *args, cwd=out, timeout=900)
            path = out / "bundle" / "diagnosis.json"
            assert path.exists(), run.stderr[-3000:]
            cache[key] = (run, json.loads(path.read_text()))
        return cache[key]

    return get

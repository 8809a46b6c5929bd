"""Shared fixtures: each planted script runs once per test session, through the real CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from clihelp import SCRIPTS, CliRun, pt2doctor


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

"""Each planted accuracy script runs once per test session through the real CLI (real torch.compile)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from accuracy_scripts import SCRIPTS  # noqa: E402
from clihelp import CliRun, pt2doctor  # noqa: E402


@pytest.fixture(scope="session")
def accuracy_run(tmp_path_factory: pytest.TempPathFactory):
    """`pt2doctor accuracy --json` on a planted script, once per session per (script, extra args, script args)."""
    cache: dict[tuple[str, ...], CliRun] = {}

    def get(script: str, *extra: str, args: tuple[str, ...] = ()) -> CliRun:
        key = (script, *extra, "--", *args)
        if key not in cache:
            out = tmp_path_factory.mktemp(Path(script).stem)
            cache[key] = pt2doctor("accuracy", "--json", "--out", str(out), *extra, str(SCRIPTS / script), *args,
                                   timeout=600)
        return cache[key]

    return get

"""`graphs` importable, and recorded runs shared by the tests that read them (each made once a session)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from clihelp import CliRun, pt2doctor

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def recorded(tmp_path_factory: pytest.TempPathFactory):
    """`pt2doctor run --record` on a user script's source (`accuracy`: PT2DOCTOR_RECORD_ACCURACY), once per
    session per source: the run directory."""
    cache: dict[tuple[str, str | None], Path] = {}

    def get(source: str, accuracy: str | None = None) -> Path:
        if (source, accuracy) not in cache:
            root = tmp_path_factory.mktemp("recorded")
            script = root / "user.py"
            script.write_text(textwrap.dedent(source))
            with pytest.MonkeyPatch.context() as patch:
                if accuracy:
                    patch.setenv("PT2DOCTOR_RECORD_ACCURACY", accuracy)
                pt2doctor("run", "--record", "--out", str(root / "run"), str(script))
            cache[source, accuracy] = root / "run"
        return cache[source, accuracy]

    return get


@pytest.fixture(scope="session")
def minified():
    """`pt2doctor minify RUN_DIR --json --jobs 2`, once per session per run: (the CLI run, minify.json)."""
    cache: dict[Path, tuple[CliRun, dict]] = {}

    def get(run_dir: Path) -> tuple[CliRun, dict]:
        if run_dir not in cache:
            run = pt2doctor("minify", str(run_dir), "--json", "--jobs", "2", timeout=600)
            cache[run_dir] = (run, json.loads(run.stdout) if run.stdout.strip() else {})
        return cache[run_dir]

    return get

"""Real torch releases (issue 29): bugs of the real-bug corpus run under torch 2.13.0 (the tests' own, CPU)
and 2.14.1 (pip's CUDA build: about 6 GB installed, minutes to install: these tests are slow).

The environments go to a persistent cache, so only the first run installs: `PT2DOCTOR_TEST_VERSIONS_CACHE`
(default `~/.cache/pt2doctor/torch-envs-tests`). An environment made beforehand can stand in through the
user-facing option, `PT2DOCTOR_TEST_TORCH_ENVS=2.14.1=/path/to/venv` (passed as `--torch-env`).
Which bugs 2.14.1 fixes was measured with `bench/versions.py` (bench/results/versions-2026-11-26.md)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import sys
from pathlib import Path

import pytest
from clihelp import pt2doctor

from pt2doctor.versions.torch_envs import default_cache_dir, list_releases

REALBUGS = Path(__file__).parents[1] / "realbugs"
FIXED_IN_2141 = REALBUGS / "bool_min_indices.py"  # passes on 2.14.1 (bench/results/versions-2026-11-26.md)
FAILS_ON_BOTH = REALBUGS / "arange_int64_mul_overflow.py"  # fails the same way on both (the same)
CACHE = Path(os.environ.get("PT2DOCTOR_TEST_VERSIONS_CACHE") or default_cache_dir().with_name("torch-envs-tests"))
GIVEN = tuple(arg for env in os.environ.get("PT2DOCTOR_TEST_TORCH_ENVS", "").split(",") if env
              for arg in ("--torch-env", env))
RELEASES = ("--releases", "2.13.0,2.14.1", "--versions-cache", str(CACHE), *GIVEN)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not importlib.metadata.version("torch").startswith("2.13.0"),
                       reason="the outcomes below are those of torch 2.13.0 against 2.14.1"),
]


def _torch_here() -> list[str]:
    """The torch distributions installed in the interpreter the tests run in."""
    return sorted(d.metadata["Version"] for d in importlib.metadata.distributions() if d.metadata["Name"] == "torch")


def _versions(tmp_path: Path, script: Path) -> dict:
    before = _torch_here()
    run = pt2doctor("versions", "--out", str(tmp_path / "out"), *RELEASES, str(script), timeout=3600)
    assert run.code == 0, run.stderr[-3000:]
    assert _torch_here() == before, "nothing is installed into the user's environment"
    return json.loads((tmp_path / "out" / "versions.json").read_text())


def test_a_bug_fixed_in_the_newer_release_is_said_fixed_there(tmp_path):
    doc = _versions(tmp_path, FIXED_IN_2141)
    mine, newer = doc["runs"]
    assert mine["release"] == "2.13.0" and mine["outcome"] == "fails_same" and mine["env"] == ""
    assert newer["release"] == "2.14.1" and newer["outcome"] == "passes" and newer["torch"].startswith("2.14.1")
    assert doc["fixed"] == {"before": "2.13.0", "after": "2.14.1", "exact": True} and doc["regressed"] is None
    assert GIVEN or Path(newer["env"]).resolve().is_relative_to(CACHE.resolve())
    assert Path(newer["env"]).resolve() != Path(sys.prefix).resolve()
    assert mine["signature"] == doc["target"] == "AssertionError"


def test_a_bug_both_releases_have_fails_the_same_way_in_both(tmp_path):
    doc = _versions(tmp_path, FAILS_ON_BOTH)
    assert [(r["release"], r["outcome"]) for r in doc["runs"]] == [("2.13.0", "fails_same"), ("2.14.1", "fails_same")]
    assert doc["fixed"] is None and doc["regressed"] is None
    assert doc["runs"][1]["signature"] == doc["target"]


def test_diagnose_offers_the_upgrade_first_verified_on_the_repro(tmp_path):
    run = pt2doctor("diagnose", "--out", str(tmp_path / "bundle"), "--versions", *RELEASES, str(FIXED_IN_2141),
                    timeout=3600)
    doc = json.loads((tmp_path / "bundle" / "diagnosis.json").read_text())
    assert doc["versions"]["fixed"]["after"] == "2.14.1", run.stderr[-3000:]
    first = doc["workarounds"][0]
    assert first["change"] == "upgrade torch to 2.14.1" and first["verified_on"] == "repro" and first["verified"]
    assert doc["next_steps"][0].startswith("Workaround, verified on the repro (not on your whole program): upgrade")
    issue = (tmp_path / "bundle" / "issue.md").read_text()
    assert "**Upgrade** (verified on the repro" in issue and "| 2.14.1 | cuda 13.0 | passes |" in issue


def test_pip_lists_both_releases_here(tmp_path):
    listed = list_releases(tmp_path)
    assert "2.14.1" in listed and "2.13.0+cpu" in listed

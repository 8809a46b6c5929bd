"""A machine on which every program of a kind fails is not a bug in the program (issue 30): before blaming
it, `diagnose` runs a one-op program through the same compiler on the same device; when that fails the same
way, the headline says the environment is at fault, and nothing is minified, no culprit named, no issue.md
written. Here the machine is broken on purpose: `CXX=/bin/false`, so Inductor finds no C++ compiler."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
EXPORT_SCRIPTS = HERE.parent / "export" / "scripts"


def _diagnose_without_a_compiler(script: Path, out: Path) -> dict:
    env = dict(os.environ, CXX="/bin/false")
    env.pop("TORCH_TRACE", None)
    proc = subprocess.run([sys.executable, "-m", "pt2doctor", "diagnose", "--out", str(out), str(script)],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 1, proc.stderr[-3000:]
    return json.loads((out / "diagnosis.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("script", [HERE / "scripts" / "inductor_plain.py", EXPORT_SCRIPTS / "aoti_relu_bug.py"],
                         ids=["torch.compile", "aoti"])
def test_a_compiler_missing_from_the_machine_is_the_environments_fault(script, tmp_path):
    d = _diagnose_without_a_compiler(script, tmp_path / "out")
    assert d["headline"].startswith("the environment, not your program: one op"), d["headline"]
    assert "InvalidCxxCompiler" in d["headline"]
    assert d["control"]["fails_the_same_way"] and Path(d["control"]["path"]).is_file()
    assert d["culprit_ops"] == [] and d["repro"] is None and d["minify"] is None and d["program"] is None
    assert not (tmp_path / "out" / "issue.md").exists()

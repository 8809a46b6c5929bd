"""End to end from a user script: record with the graph recorder, then `pt2doctor minify RUN_DIR`.

Covers a custom backend defined in the user's script (PyTorch's launcher cannot see it:
`InvalidBackend`), one that segfaults on one op, and the CLI's exit status and JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from graphs import PICKY_BACKEND

from pt2doctor.capture.recorded_run import record_script

RAISES = PICKY_BACKEND + """
    def f(x, w):
        for _ in range(4):
            x = torch.sin(x @ w) * 2
        x = torch.relu(x)
        return torch.cos(x).sum(dim=0)

    torch.compile(f, backend=picky_backend)(torch.randn(8, 8), torch.randn(8, 8))
"""

SEGFAULTS = """
    import ctypes
    import torch

    def crashing_backend(gm, example_inputs):
        for node in gm.graph.nodes:
            if node.target is torch.tanh:
                ctypes.string_at(0)
        return gm

    def f(x):
        x = torch.sin(x) + 1
        x = torch.tanh(x * 3)
        return torch.cos(x) - 2

    torch.compile(f, backend=crashing_backend)(torch.randn(4, 4))
"""


def _minify_script(tmp_path: Path, source: str, env: dict[str, str] | None = None) -> tuple[int, dict]:
    script = tmp_path / "user.py"
    script.write_text(textwrap.dedent(source))
    run_dir = tmp_path / "run"
    record_script(script, run_dir)
    proc = subprocess.run(
        [sys.executable, "-c", "from pt2doctor.cli.minify import minify_command; minify_command()",
         str(run_dir), "--json", "--jobs", "2"], capture_output=True, text=True, timeout=600,
        env={**os.environ, **(env or {})},
    )
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else {}


def test_custom_backend_in_user_script(tmp_path):
    code, result = _minify_script(tmp_path, RAISES)
    assert code == 0, result
    assert result["ops"] == ["torch.relu"]
    assert result["signature"]["text"] == "NotImplementedError: picky_backend: no relu please"
    repro = (tmp_path / "run" / "repro.py").read_text()
    assert "def picky_backend" in repro
    assert subprocess.run([sys.executable, "repro.py"], cwd=tmp_path / "run", capture_output=True).returncode == 1


@pytest.mark.parametrize("servers", ["0", pytest.param("1", marks=pytest.mark.slow)],  # servers: the GPU way (40 s)
                         ids=["forks", "servers"])
def test_segfaulting_backend(tmp_path, servers):
    code, result = _minify_script(tmp_path, SEGFAULTS, env={"PT2DOCTOR_MINIFY_SERVERS": servers})
    assert code == 0, result
    assert result["ops"] == ["torch.tanh"]
    assert result["signature"] == {"kind": "signal", "text": "SIGSEGV"}


CAUGHT_THEN_FATAL = """
    import torch

    def my_backend(gm, example_inputs):
        for node in gm.graph.nodes:
            if node.target is torch.cos:
                raise RuntimeError("my_backend: cos unsupported (caught by the script)")
            if node.target is torch.exp:
                raise RuntimeError("my_backend: exp unsupported (the failure the run ends with)")
        return gm.forward

    try:
        torch.compile(lambda x: torch.cos(x) + 1, backend=my_backend)(torch.randn(3))
    except Exception as exc:
        print("ignored:", type(exc).__name__)
    torch.compile(lambda x: torch.exp(x) * 2, backend=my_backend)(torch.randn(3))
"""


def test_the_failure_the_run_ended_with_is_minified_not_an_earlier_caught_one(tmp_path):
    code, result = _minify_script(tmp_path, CAUGHT_THEN_FATAL)
    assert code == 0, result
    assert result["ops"] == ["torch.exp"] and "exp unsupported" in result["signature"]["text"]


def _minify_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from pt2doctor.cli import main; main()", "minify", *args],
                          capture_output=True, text=True, timeout=300)


def test_a_directory_without_a_recording_is_a_usage_error(tmp_path):
    proc = _minify_cli(str(tmp_path / "nowhere"))
    assert proc.returncode == 64 and "holds no recorded graphs" in proc.stderr
    assert not (tmp_path / "nowhere").exists()


def test_a_damaged_recording_is_bad_input_not_an_internal_error(tmp_path):
    script = tmp_path / "user.py"
    script.write_text(textwrap.dedent(CAUGHT_THEN_FATAL))
    record_script(script, tmp_path / "run")
    for code in (tmp_path / "run" / "graphs").glob("g*.py"):
        code.write_bytes(code.read_bytes()[:30])  # cut short, as by a killed recorder
    proc = _minify_cli(str(tmp_path / "run"))
    assert proc.returncode == 65, proc.stderr[-2000:]
    assert "cannot be read" in proc.stderr and "Traceback" not in proc.stderr


def test_nothing_failed_exits_3(tmp_path):
    script = tmp_path / "ok.py"
    script.write_text("import torch\ntorch.compile(lambda x: x + 1, backend='eager')(torch.randn(2))\n")
    record_script(script, tmp_path / "run")
    proc = subprocess.run([sys.executable, "-c", "from pt2doctor.cli.minify import minify_command; minify_command()",
                           str(tmp_path / "run")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3

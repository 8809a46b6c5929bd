"""Run the real `pt2doctor` CLI in a subprocess, for end-to-end tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCRIPTS = Path(__file__).parent / "scripts"
FIXTURES = Path(__file__).parent / "fixtures"


@dataclass(frozen=True)
class CliRun:
    code: int
    stdout: str
    stderr: str
    out_dir: Path

    @property
    def doc(self) -> dict[str, Any]:
        return json.loads(self.stdout)


def pt2doctor(*args: str, cwd: Path | None = None, stdin: str | None = None, timeout: float = 300) -> CliRun:
    env = dict(os.environ)
    env.pop("TORCH_TRACE", None)
    proc = subprocess.run([sys.executable, "-m", "pt2doctor", *args], capture_output=True, text=True, cwd=cwd,
                          input=stdin, timeout=timeout, env=env)
    out_dir = (cwd or Path()) / args[args.index("--out") + 1] if "--out" in args else Path()
    return CliRun(proc.returncode, proc.stdout, proc.stderr, out_dir)

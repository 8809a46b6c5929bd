"""Verify a repro the way a user would meet it: `python repro.py` in a fresh interpreter.

Contract: `verify(path, target)` runs the script with the current interpreter in a new process
(no pt2doctor on the import path is needed, nothing inherited but the environment), with a
timeout, and says whether it failed with exactly the target signature. A repro is reported as
verified only when this returns `verified=True`.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from pt2doctor.model.minify import FailureSignature
from pt2doctor.reduce.signature import from_exit


@dataclass(frozen=True, slots=True)
class Verification:
    verified: bool
    seen: FailureSignature | None
    returncode: int | None
    output_tail: str = ""


def verify(path: Path, target: FailureSignature, *, timeout_s: float = 300.0) -> Verification:
    try:
        proc = subprocess.run(
            [sys.executable, path.name], cwd=path.parent, capture_output=True, text=True, timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return Verification(False, None, None, "timed out")
    output = proc.stdout + proc.stderr
    seen = from_exit(proc.returncode, output)
    return Verification(seen == target, seen, proc.returncode, output[-2000:])

"""Facts about the torch in this process: versions, devices, the compiler, non-default config.

Contract: `describe(torch)` returns JSON-ready facts; it never raises for a missing CUDA or compiler.
Only called in a process that already imported torch (the child at exit, or `watch()`).
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

from pt2doctor.capture import torch_compat


def describe(torch: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {"torch": torch.__version__, "cuda": getattr(torch.version, "cuda", None)}
    try:
        if torch.cuda.is_available():
            facts["gpu"] = torch.cuda.get_device_name(0)
    except Exception:
        facts["gpu"] = None
    facts["compiler"] = cxx_version()
    facts["config_diff"] = torch_compat.config_diff()
    return facts


def cxx_version() -> str | None:
    """The C++ compiler Inductor would find, in one line (`--version`'s first); no torch needed."""
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if cxx is None:
        return None
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.splitlines()[0] if out.stdout else None

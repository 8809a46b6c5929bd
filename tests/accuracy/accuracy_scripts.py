"""The planted accuracy scripts and where their lines are (a module with a unique name, not conftest)."""

from __future__ import annotations

from pathlib import Path

SCRIPTS = Path(__file__).parent / "scripts"


def line_of(script: str, text: str) -> int:
    """The 1-based line of `text` in a planted script, so tests do not hard-code line numbers."""
    lines = (SCRIPTS / script).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)

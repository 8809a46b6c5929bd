"""Graph-break messages as torch writes them into traces, taken apart into model values (guard failures
are `guard_text`).

Contract: pure functions from torch's text to model values. Every pattern here was checked against
torch 2.13.0 output (and the 2.11 wording, which is the same for these messages); text that matches
no pattern still yields a value (the raw first line as the reason) so nothing is lost.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from pt2doctor.model import SourceLoc

_AT = re.compile(r"Graph break in user code at (?P<file>.+):(?P<line>\d+)")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>.+)$')
_GB_URL = re.compile(r"(?P<url>https?://[^\s\"'<>]+/gb/(?P<id>gb\d+)\.html)")
_NOISE_HINTS = ("Please report an issue to PyTorch",)


@dataclass(frozen=True, slots=True)
class BreakText:
    """The parts of one graph-break (or `Unsupported`) message."""

    break_type: str
    explanation: str
    hints: tuple[str, ...]
    gb_id: str | None
    gb_url: str | None
    where: SourceLoc | None
    user_stack: tuple[SourceLoc, ...]

    @property
    def reason(self) -> str:
        if self.explanation:
            return f"{self.break_type}: {self.explanation}" if self.break_type else self.explanation
        return self.break_type


def parse_break_text(text: str) -> BreakText:
    lines = text.splitlines()
    explanation_at = next((i for i, ln in enumerate(lines) if ln.strip().startswith("Explanation:")), None)
    if explanation_at is not None:
        above = [ln.strip() for ln in lines[:explanation_at] if ln.strip()]
        break_type = above[-1] if above else ""
        explanation = lines[explanation_at].split("Explanation:", 1)[1].strip()
    else:
        first = next((ln for ln in lines if ln.strip().startswith("Graph Break Reason:")), None)
        body = first.split(":", 1)[1].strip() if first else next((ln.strip() for ln in lines if ln.strip()), "")
        break_type, explanation = body, ""
    if break_type.startswith("Graph Break Reason:"):
        break_type = break_type.split(":", 1)[1].strip()
    hints = tuple(dict.fromkeys(  # torch repeats a hint when two registry entries carry it
        ln.split("Hint:", 1)[1].strip()
        for ln in lines
        if ln.strip().startswith("Hint:") and not any(n in ln for n in _NOISE_HINTS)
    ))
    gb = _GB_URL.search(text)
    stack = user_stack(lines)
    at = _AT.search(text)
    where = SourceLoc(at["file"], int(at["line"])) if at else (stack[-1] if stack else None)
    if where is not None and stack and (stack[-1].file, stack[-1].line) == (where.file, where.line):
        where = stack[-1]
    return BreakText(break_type, explanation, hints, gb["id"].upper() if gb else None, gb["url"] if gb else None,
                     where, stack)


def user_stack(lines: list[str]) -> tuple[SourceLoc, ...]:
    try:
        start = next(i for i, ln in enumerate(lines) if ln.startswith(("User code traceback:", "User stack trace:")))
    except StopIteration:
        return ()
    frames: list[SourceLoc] = []
    for i in range(start + 1, len(lines)):
        match = _FRAME.match(lines[i])
        if match:
            code = lines[i + 1].strip() if i + 1 < len(lines) and not _FRAME.match(lines[i + 1]) else ""
            frames.append(SourceLoc(match["file"], int(match["line"]), match["fn"].strip(), code))
        elif not lines[i].strip() and frames:
            break
    return tuple(f for f in frames if not _is_launcher_frame(f.file))


_PACKAGE_DIR = str(Path(__file__).resolve().parents[1]) + os.sep


_EXAMPLES_DIR = _PACKAGE_DIR + "examples" + os.sep


def _is_launcher_frame(file: str) -> bool:
    """pt2doctor's own frames and runpy's (the child runs the script through `runpy.run_path`); the
    bundled examples (`pt2doctor demo`) live in the package but are user code."""
    ours = file.startswith(_PACKAGE_DIR) and not file.startswith(_EXAMPLES_DIR)
    return ours or file == "<frozen runpy>" or Path(file).name == "runpy.py"

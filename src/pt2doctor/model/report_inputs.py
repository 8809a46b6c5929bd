"""What the HTML page shows beyond the session and its analysis: trace artifacts, per-rank compiles,
source lines around each break and failure (collected by `capture.report_inputs`), and the caps on them.

Contract: plain frozen values; the HTML renderer formats them without I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pt2doctor.model.session import Compile


@dataclass(frozen=True, slots=True)
class HtmlLimits:
    """Caps that keep a page from a 100 MB trace quick to open (its sections load lazily)."""

    artifact_bytes: int = 200_000
    total_bytes: int = 40_000_000
    snippets: int = 200


@dataclass(frozen=True, slots=True)
class ArtifactText:
    kind: str
    label: str
    text: str
    size: int
    truncated: bool


@dataclass(frozen=True, slots=True)
class Snippet:
    """Lines `first`.. of a user file; `line` is the one to highlight."""

    file: str
    line: int
    first: int
    lines: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class HtmlInputs:
    artifacts: dict[tuple[int | None, str], tuple[ArtifactText, ...]] = field(default_factory=dict)
    cache_events: dict[tuple[int | None, str], tuple[str, ...]] = field(default_factory=dict)
    rank_compiles: dict[int, tuple[Compile, ...]] = field(default_factory=dict)
    snippets: dict[tuple[str, int], Snippet] = field(default_factory=dict)
    omitted_artifacts: int = 0

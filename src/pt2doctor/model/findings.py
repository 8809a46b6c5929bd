"""Findings and the rest of what analysis concludes about a session, as values renderers format.

Contract: renderers (terminal, HTML, JSON, `issue.md`, the advisor texts) only format these values;
they never decide a severity, choose a cause, or word a piece of advice. Everything a renderer shows
about a session beyond its raw facts is in an `Analysis`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from pt2doctor.model.ids import CompileId, SourceLoc
from pt2doctor.model.session import Category, Failure, GuardFailure, LimitHit, Recompile


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str
    severity: Severity
    title: str
    evidence: tuple[str, ...] = ()
    fix: tuple[str, ...] = ()
    where: SourceLoc | None = None
    compile_id: CompileId | None = None
    weight: float = 0.0


@dataclass(frozen=True, slots=True)
class Verdict:
    """The one-line verdict of a run and the process exit code that mirrors it."""

    ok: bool
    headline: str
    exit_code: int
    category: Category | None = None


@dataclass(frozen=True, slots=True)
class RecompileStep:
    """One recompile of a function: the guard failure that caused it (None when torch's reason could not
    be taken apart: then `recompile.reason` is all there is) and that cause in words, torch's own hint on
    it, the other cache entries' failures, and the change that avoids it."""

    recompile: Recompile
    cause: GuardFailure | None
    cause_words: str | None = None
    torch_hint: str | None = None
    also_failed: tuple[str, ...] = ()
    fix: str | None = None


@dataclass(frozen=True, slots=True)
class RecompileChain:
    """A function's recompiles in compile order, with its recompile-limit hit, if any. `fixes` are the
    distinct fixes of its steps, the most frequent cause's first; `limit_note` says what the hit did,
    `limit_cause` why the call at the limit wanted to recompile."""

    function: str
    file: str
    line: int
    title: str
    steps: tuple[RecompileStep, ...]
    limit_hit: LimitHit | None = None
    limit_note: str = ""
    fixes: tuple[str, ...] = ()
    limit_cause: str | None = None


@dataclass(frozen=True, slots=True)
class FailureExplanation:
    """A failure with the line that says what went wrong at its root (the innermost exception of its
    chain) and pt2doctor's notes on it (e.g. CUDA reports a kernel's error at a later call)."""

    failure: Failure
    root: str
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Analysis:
    """What analysis concluded about one session: everything a renderer needs besides the raw facts."""

    findings: tuple[Finding, ...]
    verdict: Verdict
    recompiles: tuple[RecompileChain, ...] = ()
    failures: tuple[FailureExplanation, ...] = ()
    phase_totals: dict[str, float] = field(default_factory=dict)
    actions: tuple[Finding, ...] = ()  # what to do first: the findings a reader should act on, in order

"""Analysis: Session -> findings. Each question is one small pure function, listed in `ANALYSES`.

Contract: `enrich(session)` returns the session with derived facts filled in (failure categories,
cookbook hints); it is idempotent, so a saved session can be enriched again on load. `analyze`
runs every analysis and returns findings, most important first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pt2doctor.analysis.compile_time import find_compile_time
from pt2doctor.analysis.cookbook import with_advice
from pt2doctor.analysis.failures import classify_failures
from pt2doctor.analysis.graph_breaks import find_graph_breaks
from pt2doctor.analysis.recompiles import find_recompiles
from pt2doctor.analysis.verdict import Verdict, verdict_for
from pt2doctor.model import Finding, Session, Severity

ANALYSES: tuple[Callable[[Session], list[Finding]], ...] = (
    find_graph_breaks,
    find_recompiles,
    find_compile_time,
)

_ORDER = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


def enrich(session: Session) -> Session:
    session = classify_failures(session)
    return replace(session, graph_breaks=tuple(with_advice(b) for b in session.graph_breaks))


def analyze(session: Session) -> list[Finding]:
    findings = [f for analysis in ANALYSES for f in analysis(session)]
    return sorted(findings, key=lambda f: (_ORDER[f.severity], -f.weight))


__all__ = ["ANALYSES", "Verdict", "analyze", "enrich", "verdict_for"]

"""Analysis: Session -> findings. Each question is one small pure function, listed in `ANALYSES`.

Contract: `enrich(session)` returns the session with derived facts filled in (failure categories,
cookbook hints); it is idempotent, so a saved session can be enriched again on load. `analyze`
runs every analysis and returns findings, most important first. `analyze_session` does both and
returns, with the enriched session, the whole `Analysis` renderers format: findings, verdict,
each recompile chain with its chosen causes and fixes, each failure's root line and notes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pt2doctor.analysis.compile_time import find_compile_time, phase_totals
from pt2doctor.analysis.cookbook import with_advice
from pt2doctor.analysis.failures import classify_failures, explain_failure
from pt2doctor.analysis.graph_breaks import find_graph_breaks
from pt2doctor.analysis.recompiles import find_recompiles, recompile_chains
from pt2doctor.analysis.verdict import verdict_for
from pt2doctor.model import Analysis, Finding, Session, Severity, Verdict

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


def analyze_session(session: Session) -> tuple[Session, Analysis]:
    session = enrich(session)
    findings = tuple(analyze(session))
    return session, Analysis(findings=findings, verdict=verdict_for(session),
                             recompiles=tuple(recompile_chains(session)),
                             failures=tuple(explain_failure(f) for f in session.failures),
                             phase_totals=phase_totals(session), actions=what_to_do(findings))


TOP_ACTIONS = 5


def what_to_do(findings: tuple[Finding, ...], top: int = TOP_ACTIONS) -> tuple[Finding, ...]:
    """The findings to act on first: those with a fix that are not expected behaviour (INFO), the worst of
    each kind first (so the most frequent recompile is never crowded out by many graph breaks), then the
    rest in order; with none, where the compile time goes."""
    actionable = [f for f in findings if f.fix and f.severity is not Severity.INFO]
    firsts = [f for i, f in enumerate(actionable) if f.kind not in {g.kind for g in actionable[:i]}]
    chosen = list(dict.fromkeys([*firsts, *actionable]))[:top]
    if chosen:
        return tuple(chosen)
    return tuple(f for f in findings if f.severity is not Severity.INFO or f.kind == "compile_time")[:2]


__all__ = ["ANALYSES", "Verdict", "analyze", "analyze_session", "enrich", "verdict_for"]

"""Compile time -> findings: where the time goes, per frame and per phase."""

from __future__ import annotations

from pt2doctor.model import Finding, Session, Severity, SourceLoc
from pt2doctor.model.session import PHASE_LABELS, PHASE_NAMES


def phase_totals(session: Session) -> dict[str, float]:
    return {p: sum(getattr(c.phases, p) for c in session.compiles) for p in PHASE_NAMES}


def find_compile_time(session: Session, *, top: int = 3) -> list[Finding]:
    total = session.compile_time_s
    if total <= 0:
        return []
    totals = phase_totals(session)
    dominant = max(totals, key=lambda p: totals[p])
    recompile_time = sum(c.time_s or 0.0 for c in session.compiles if c.compile_id.frame_compile > 0)
    findings = [Finding(
        kind="compile_time", severity=Severity.INFO,
        title=f"{total:.2f} s compiling, mostly in {PHASE_LABELS[dominant]} ({totals[dominant] / total:.0%})",
        evidence=tuple(f"{PHASE_LABELS[p]}: {totals[p]:.2f} s" for p in PHASE_NAMES if totals[p])
        + ((f"recompiles cost {recompile_time:.2f} s",) if recompile_time else ()),
        weight=total,
    )]
    slowest = sorted(session.compiles, key=lambda c: -(c.time_s or 0.0))[:top]
    for c in slowest:
        if (c.time_s or 0.0) < 0.25 * total:
            continue
        findings.append(Finding(
            kind="slow_compile", severity=Severity.INFO, title=f"[{c.compile_id}] {c.function} took {c.time_s:.2f} s",
            where=SourceLoc(c.file, c.line, c.function), compile_id=c.compile_id, weight=c.time_s or 0.0,
        ))
    return findings

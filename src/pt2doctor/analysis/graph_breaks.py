"""Graph breaks -> findings ordered by measured impact: how often the code resumed after the break recompiled
and its compile time, then how often the break is hit and how many frames it splits (`cookbook.BreakImpact`)."""

from __future__ import annotations

from pt2doctor.analysis.cookbook import advice_for, break_impact
from pt2doctor.model import Finding, Session, Severity, SourceLoc


def find_graph_breaks(session: Session) -> list[Finding]:
    findings = []
    for gb in session.graph_breaks:
        recipe = advice_for(gb)
        cause = recipe.cause if recipe else gb.explanation or gb.reason
        fix = tuple(h for h in gb.hints)
        where = SourceLoc(gb.file, gb.line, gb.function, gb.code)
        frames = len({cid.frame_key for cid in gb.compile_ids}) or 1
        impact = break_impact(session, gb.file, gb.line)
        evidence = (f"{gb.reason}", f"hit {gb.count}x in {frames} frame(s)") + (
            (f"the code after it recompiled {impact.recompiles}x",) if impact.recompiles else ())
        findings.append(Finding(
            kind="graph_break", severity=Severity.ERROR if gb.fatal else Severity.WARNING,
            title=f"graph break at {gb.file}:{gb.line} ({cause})", evidence=evidence, fix=fix, where=where,
            compile_id=gb.compile_ids[0] if gb.compile_ids else None,
            weight=impact.weight(gb.count, frames),
        ))
    return sorted(findings, key=lambda f: -f.weight)

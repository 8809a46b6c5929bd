"""Graph breaks -> findings ordered by impact (how many graphs they split, how often they are hit)."""

from __future__ import annotations

from pt2doctor.analysis.cookbook import advice_for
from pt2doctor.model import Finding, Session, Severity, SourceLoc


def find_graph_breaks(session: Session) -> list[Finding]:
    findings = []
    for gb in session.graph_breaks:
        recipe = advice_for(gb)
        cause = recipe.cause if recipe else gb.explanation or gb.reason
        fix = tuple(h for h in gb.hints)
        where = SourceLoc(gb.file, gb.line, gb.function, gb.code)
        evidence = (f"{gb.reason}", f"hit {gb.count}x in {len(gb.compile_ids) or 1} frame(s)")
        findings.append(Finding(
            kind="graph_break", severity=Severity.ERROR if gb.fatal else Severity.WARNING,
            title=f"graph break at {gb.file}:{gb.line} ({cause})", evidence=evidence, fix=fix, where=where,
            compile_id=gb.compile_ids[0] if gb.compile_ids else None, weight=gb.count * 10 + len(gb.compile_ids),
        ))
    return sorted(findings, key=lambda f: -f.weight)

"""The diagnosis section of the HTML report, as data: `diagnosis_section(d, repro, issue)` -> a JSON-like dict.

Contract: pure; the dict is drawn by the generic blocks (`html_data.blocks_for`): the headline and
the facts as key/value rows, the stage table and the runs as tables, the minimal repro as Python and
`issue.md` as Markdown, both collapsible code blocks. Strings stay raw: the template escapes them.
"""

from __future__ import annotations

from typing import Any

from pt2doctor.model.diagnosis import STAGE_TITLES, Diagnosis
from pt2doctor.report.versions import conclusions, release_rows


def diagnosis_section(d: Diagnosis, repro_text: str = "", issue_md: str = "") -> dict[str, Any]:
    section: dict[str, Any] = {
        "headline": d.headline,
        "category": d.category.value if d.category else None,
        "failing stage": STAGE_TITLES[d.stage] if d.stage else None,
        "flaky": d.flaky,
        "bisection": d.bisection.describe() if d.bisection else None,
        "culprit ops": list(d.culprit_ops),
        "came from (the user's calls)": [o.describe() for o in d.culprit_sources] or None,
        "needs of its inputs": [n.describe() for n in d.input_needs] or None,
        "un-guarded changes": [f"{c.statement} (writes {c.path})" for c in d.program.changes] if d.program else None,
        "minified nodes": d.minified_nodes,
        "program reduced (lines)": f"{d.program.lines_before} -> {d.program.lines_after}" if d.program else None,
        "repro verified in a fresh interpreter": d.repro_verified if d.repro else None,
        "repro runs": str(d.repro_runs) if d.repro and d.repro_runs else None,
        "where": ", ".join(str(f) for f in d.user_frames[:3]) or None,
        "needs the compiler": d.needs_compiler.describe() if d.needs_compiler else None,
    }
    fault = d.runtime.fault if d.runtime else None
    if fault is not None:
        section["first bad kernel"] = f"{fault.kernel} (graph {fault.graph}, {fault.kind.value}): {fault.words}"
        section["its fused ops"] = list(fault.ops)
        section["its ops came from"] = [o.describe() for o in fault.sources] or None
    if d.runtime is not None:
        section["compute-sanitizer"] = d.runtime.sanitizer.words if d.runtime.sanitizer else None
    if d.stages:
        section["stage table"] = [{"backend": b, "result": r} for b, r in d.stages.items()]
    section["runs"] = [
        {"run": a.label, "backend": a.backend or "(the script's)", "outcome": a.outcome, "error": a.error,
         "seconds": a.wall_s}
        for a in d.attempts
    ]
    if d.versions is not None:
        section["torch releases (repro.py under each)"] = release_rows(d.versions)
        section["what the torch releases say"] = [{"finding": line} for line in conclusions(d.versions)] or None
    section["next steps"] = [{"step": s} for s in d.next_steps] or None
    section["notes"] = [{"note": n} for n in d.notes] or None
    section["step times (s)"] = dict(d.timings)
    if repro_text:
        section["repro.py"] = repro_text
    if issue_md:
        section["issue.md"] = issue_md
    return {k: v for k, v in section.items() if v not in (None, [], {})}

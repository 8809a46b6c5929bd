"""A job of several processes as text: one row per rank, then how each rank departs from the reference.
Pure: `render_job(job) -> str`; the divergence and its consequence were decided by `analysis.ranks`."""

from __future__ import annotations

from pt2doctor.model.job import Job
from pt2doctor.report.compare import render_changes


def render_job(job: Job) -> str:
    header = ("process", "frames", "graphs", "graph breaks", "recompiles", "compile time", "failures")
    rows = [header] + [(p.label, str(p.session.frames), str(p.session.graphs), str(p.session.graph_break_count),
                        str(len(p.session.recompiles)), f"{p.session.compile_time_s:.2f} s",
                        ", ".join(f.category.value for f in p.session.failures) or "-") for p in job.processes]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [f"{len(job.processes)} processes", ""]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.append("")
    if not job.processes:
        return "\n".join(lines)
    first = next((p for p in job.processes if p.label == job.first_failure), None)
    if first is not None:
        f = first.session.failures[0]
        lines += [f"{first.label} failed first: {f.exception.rsplit('.', 1)[-1]}: "
                  f"{(f.message.splitlines() or [''])[0][:200]} ({f.category.value}"
                  f"{f', {f.file}:{f.line}' if f.file else ''}); diagnose that one.", ""]
    if job.at_timeout:
        lines += _at_timeout(job), ""
    for gap in job.parity:
        lines += [f"{gap.label}: {gap.graph}: the scheduler placed {', '.join(gap.scheduled)}; the output code calls "
                  f"{', '.join(gap.in_code)}", f"  {gap.detail}", ""]
    reference = job.processes[0].label
    if not job.divergence:
        lines.append(f"Every process compiled what {reference} compiled.")
    for d in job.divergence:
        lines.append(f"{d.label} differs from {reference}:")
        lines += render_changes(d.comparison, (reference, d.label), indent="  ")
        if d.consequence:
            lines += [f"  => {d.consequence}", ""]
    return "\n".join(lines) + "\n"


def _at_timeout(job: Job) -> str:
    lines = ["Where each rank was when the job was stopped at its timeout:"]
    for r in job.at_timeout:
        place = f"{r.where.file}:{r.where.line} `{r.where.code}`" if r.where else "(no user line)"
        what = {"collective": f"waiting in {r.detail}", "compiling": f"compiling: {r.detail}",
                "user code": "in its own code", "unknown": "unknown"}[r.state]
        lines.append(f"  {r.label}: {what}  at {place}")
    return "\n".join(lines)

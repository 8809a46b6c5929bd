"""A job of several processes as text: one row per rank, then where the ranks' collectives part, and how each
rank departs from the reference. Pure: `render_job(job) -> str`; the divergence, its consequence and the parting
were decided by `analysis.ranks` and `analysis.collectives`."""

from __future__ import annotations

from pt2doctor.model.collectives import CollectiveCall, CollectiveParting
from pt2doctor.model.job import Job
from pt2doctor.report.compare import render_changes


def render_job(job: Job) -> str:
    lines = [f"{len(job.processes)} processes", "", *_table(job), ""]
    if not job.processes:
        return "\n".join(lines)
    lines += _compiled_little(job)
    first = next((p for p in job.processes if p.label == job.first_failure), None)
    if first is not None:
        f = first.session.failures[0]
        lines += [f"{first.label} failed first: {f.exception.rsplit('.', 1)[-1]}: "
                  f"{(f.message.splitlines() or [''])[0][:200]} ({f.category.value}"
                  f"{f', {f.file}:{f.line}' if f.file else ''}); diagnose that one.", ""]
    if job.parting is not None:
        lines += [*render_parting(job.parting), ""]
    if job.unrecorded:
        lines += [unrecorded_text(job), ""]
    if job.at_timeout:
        lines += _at_timeout(job), ""
    for gap in job.parity:
        lines += [f"{gap.label}: {gap.graph}: the scheduler placed {', '.join(gap.scheduled)}; the output code calls "
                  f"{', '.join(gap.in_code)}", f"  {gap.detail}", ""]
    return "\n".join(lines + _divergence(job)) + "\n"


def unrecorded_text(job: Job) -> str:
    why = "stopped at the timeout before it was written" if job.exit.timed_out else "it died before writing it"
    return (f"{', '.join(job.unrecorded)} left no record of the collectives it issued ({why}): where the ranks' "
            "collectives part is not known.")


def _table(job: Job) -> list[str]:
    header = ("process", "frames", "graphs", "graph breaks", "recompiles", "compile time", "collectives", "failures")
    rows = [header] + [(p.label, str(p.session.frames), str(p.session.graphs), str(p.session.graph_break_count),
                        str(len(p.session.recompiles)), f"{p.session.compile_time_s:.2f} s",
                        str(len(p.collectives.calls)) if p.collectives is not None else "-",
                        ", ".join(f.category.value for f in p.session.failures) or "-") for p in job.processes]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def _divergence(job: Job) -> list[str]:
    reference = job.processes[0].label
    lines = [] if job.divergence else [f"Every process compiled what {reference} compiled."]
    for d in job.divergence:
        lines.append(f"{d.label} differs from {reference}:")
        lines += render_changes(d.comparison, (reference, d.label), indent="  ")
        if d.consequence:
            lines.append(f"  => {sentence(d.consequence)} Fix: {sentence(d.fix)}" if d.fix else f"  => {d.consequence}")
            if d.more:
                lines.append(f"     ({len(d.more)} less likely consequence(s) in the HTML report: --html)")
            lines.append("")
    return lines


def render_parting(parting: CollectiveParting) -> list[str]:
    group = "" if parting.group in ("0", "") else f" of process group {parting.group}"
    lines = [f"The ranks part at collective #{parting.seq}{group}:"]
    for rank in parting.calls:
        if rank.call is not None:
            lines.append(f"  {rank.label}: {describe_call(rank.call)}")
        else:
            last = f"; its last was {describe_call(rank.last)}" if rank.last is not None else ""
            lines.append(f"  {rank.label}: nothing (it issued {rank.issued} collective(s){last})")
    return [*lines, f"  => {sentence(parting.detail)} Fix: {sentence(parting.fix)}"]


def describe_call(call: CollectiveCall) -> str:
    """`all_reduce (Float [1024]) at train.py:12 [completed]`: one collective, as the reports name it."""
    tensors = ", ".join(f"{d} {list(s)}" for d, s in zip(call.dtypes, call.input_sizes)) or \
        ", ".join(str(list(s)) for s in call.input_sizes)
    where = f" at {call.where.file}:{call.where.line}" if call.where else ""
    compiled = f", in compiled {call.graph}" if call.graph else ", from a compiled graph" if call.compiled else ""
    return f"{call.op}{f' ({tensors})' if tensors else ''}{where}{compiled} [{call.state}]"


def _at_timeout(job: Job) -> str:
    lines = ["Where each rank was when the job was stopped at its timeout:"]
    for r in job.at_timeout:
        place = f"  at {r.where.file}:{r.where.line} `{r.where.code}`" if r.where else \
            "" if r.state == "ended" else "  (no user line)"
        what = {"collective": f"waiting in {r.detail}", "compiling": f"compiling: {r.detail}",
                "graph": "running a compiled graph",
                "user code": "in its own code", "ended": "had ended", "unknown": "unknown"}[r.state]
        pending = f"; pending: #{r.pending.seq} {describe_call(r.pending)}" if r.pending is not None else ""
        lines.append(f"  {r.label}: {what}{place}{pending}")
    return "\n".join(lines)


def sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _compiled_little(job: Job) -> list[str]:
    texts = {n.detail for n in job.compiled_little}
    if len(job.compiled_little) == len(job.processes) > 1 and len(texts) == 1:
        return [f"Every process: {texts.pop()}.", ""]
    return [line for n in job.compiled_little for line in (f"{n.label}: {n.detail}.", "")]

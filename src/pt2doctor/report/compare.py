"""A comparison and a budget check as text. Pure: `render_comparison(c)`, `render_check(overruns, ...)`;
what changed and what is over budget was decided by `analysis.compare`."""

from __future__ import annotations

from pt2doctor.model.compare import ChangeKind, Comparison, Direction, Overrun
from pt2doctor.model.job import JobComparison

TITLES = {ChangeKind.TORCH: "torch", ChangeKind.FAILURE: "Failures", ChangeKind.GRAPH_BREAK: "Graph breaks",
           ChangeKind.RECOMPILE: "Recompiles", ChangeKind.FRAME: "Compiled frames",
           ChangeKind.COMPILE_TIME: "Compile time (wall-clock, shown, not counted as a difference)",
           ChangeKind.CACHE: "Caches", ChangeKind.ACCURACY: "Accuracy",
           ChangeKind.GRAPH_INPUTS: "Graph inputs (tensor metadata)", ChangeKind.COLLECTIVES: "Collectives per graph",
           ChangeKind.COLLECTIVE_SCHEDULE: "Collective schedule (Inductor)",
           ChangeKind.COLLECTIVE_OUTPUTS: "Collective outputs (tensor metadata)",
           ChangeKind.EXECUTION_ORDER: "Graph execution order",
           ChangeKind.RUNTIME_ESTIMATE: "Runtime estimates (Inductor)"}
_MARK = {Direction.ADDED: "+", Direction.REMOVED: "-", Direction.CHANGED: "~"}


def render_comparison(c: Comparison) -> str:
    lines = [f"A: {c.before}", f"B: {c.after}", ""]
    if c.same:
        timing = render_changes(c, ("A", "B"))
        return "\n".join([*lines, "No differences in compilation.", "", *timing]).rstrip() + "\n"
    return "\n".join(lines + render_changes(c, ("A", "B")))


def render_job_comparison(c: JobComparison) -> str:
    """Per rank: what changed between the two runs of the job."""
    lines = [f"A: {c.before}", f"B: {c.after}", ""]
    lines += [f"only in {side}: {label}" for side, labels in (("A", c.only_before), ("B", c.only_after))
              for label in labels]
    for rank in c.ranks:
        if rank.comparison.same:
            lines.append(f"{rank.label}: no differences in compilation.")
            continue
        lines.append(f"{rank.label}:")
        lines += render_changes(rank.comparison, ("A", "B"), indent="  ")
    return "\n".join(lines).rstrip("\n") + "\n"


def render_changes(c: Comparison, names: tuple[str, str], indent: str = "") -> list[str]:
    """The changes by kind; `names` say the two sides where a change is on one side only."""
    lines = []
    for kind, title in TITLES.items():
        changes = [x for x in c.changes if x.kind is kind]
        if not changes:
            continue
        lines.append(f"{indent}{title}:")
        for x in changes:
            if x.direction is Direction.CHANGED:
                value = f"{x.before} -> {x.after}"
            else:
                value = f"only in {names[1] if x.direction is Direction.ADDED else names[0]}: {x.after or x.before}"
            lines.append(f"{indent}  {_MARK[x.direction]} {x.subject}: {value}")
            if x.detail and x.detail != (x.after or x.before):
                lines.append(f"{indent}      {x.detail}")
        lines.append("")
    return lines


def overruns_in_brief(overruns: tuple[Overrun, ...]) -> str:
    """`graph_breaks 2 (allowed 0), new graph break`: the check's first line."""
    return ", ".join(o.what if o.what.startswith("new ") else f"{o.what} {o.actual:g} (allowed {o.limit:g})"
                     for o in overruns)


def render_check(overruns: tuple[Overrun, ...], against: str) -> str:
    if not overruns:
        return f"within {against}\n"
    lines = [f"over {against}:"]
    for o in overruns:
        limit = f"{o.limit:g}"
        lines.append(f"  {o.what}: {o.actual:g} (allowed {limit})" if not o.what.startswith("new ")
                     else f"  {o.what} (baseline {limit:s}, now {o.actual:g})")
        lines += [f"      {line}" for line in o.evidence]
    return "\n".join(lines) + "\n"

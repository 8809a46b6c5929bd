"""Render a report for the terminal: verdict first, then breaks, recompiles, compile time, failures.

Contract: `render_terminal(report, color=..., width=...) -> str`; no printing, no progress here. It
formats the session's facts and the report's analysis (causes, fixes, notes); it decides nothing.
"""

from __future__ import annotations

import io
import shlex

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from pt2doctor.analysis.accuracy import any_wrong
from pt2doctor.model import RecompileChain, Session
from pt2doctor.model.session import PHASE_LABELS, PHASE_NAMES
from pt2doctor.report.document import Report


def render_terminal(report: Report, *, color: bool = False, width: int = 110) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=color, color_system="standard" if color else None,
                      highlight=False, soft_wrap=False)
    for part in _sections(report):
        console.print(part)
    return buffer.getvalue()


def _sections(report: Report) -> list[object]:
    s = report.session
    style = "green" if report.verdict.ok else "red"
    parts: list[object] = [Panel(Text(report.verdict.headline, style=f"bold {style}"), title="pt2doctor", expand=False)]
    parts.append(_summary(s))
    parts += _failures(report) + _breaks(s) + _recompiles(report.recompiles, len(s.recompiles)) + _compile_time(report)
    if s.accuracy:
        from pt2doctor.report.accuracy import render_accuracy

        parts.append(Text(render_accuracy(s.accuracy).rstrip(),
                          style="red" if any_wrong(s.accuracy) else ""))
    if s.trace.unreadable:
        parts.append(Text(f"note: {s.trace.unreadable} unreadable trace line(s) skipped (truncated or corrupted)",
                          style="yellow"))
    if s.run_dir:
        parts.append(Text(f"run directory: {s.run_dir}  (re-render: pt2doctor report {shlex.quote(s.run_dir)})",
                          style="dim"))
    return parts


def _summary(s: Session) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_row("frames compiled", str(s.frames), "graphs", str(s.graphs), "ops", str(s.ops))
    table.add_row("graph breaks", str(s.graph_break_count), "recompilations", str(len(s.recompiles)),
                  "compile time", f"{s.compile_time_s:.2f} s")
    return table


def _failures(report: Report) -> list[object]:
    out: list[object] = []
    for explained in report.failures:
        f = explained.failure
        body = Text()
        body.append(f"{f.category.value}", style="bold red")
        body.append(f"  {f.exception}\n")
        if f.file:
            body.append(f"at {f.file}:{f.line}\n", style="cyan")
        body.append((f.message.strip() or "(no message)")[:1500])
        for note in explained.notes:
            body.append(f"\npt2doctor: {note}", style="green")
        out.append(Panel(body, title="failure", title_align="left", border_style="red", expand=False))
    return out


def _breaks(s: Session) -> list[object]:
    if not s.graph_breaks:
        return []
    out: list[object] = [Text(f"\nGraph breaks ({len(s.graph_breaks)} distinct, {s.graph_break_count} total)",
                              style="bold")]
    for i, gb in enumerate(s.graph_breaks, 1):
        head = Text(f"{i}. ", style="bold")
        head.append(f"{gb.file}:{gb.line}", style="cyan")
        head.append(f" in {gb.function}  x{gb.count}" + ("  (fatal: fullgraph=True)" if gb.fatal else ""))
        out.append(head)
        if gb.code:
            out.append(Text(f"     > {gb.code}", style="yellow"))
        out.append(Text(f"     {gb.reason[:300]}"))
        for hint in gb.hints[:4]:
            out.append(Text(f"     - {hint[:300]}", style="green" if hint.startswith("pt2doctor:") else "dim"))
    return out


def _recompiles(chains: tuple[RecompileChain, ...], total: int) -> list[object]:
    """Per function, each recompile's cause, torch's own hint, the other cache entries' failures, then the fixes."""
    if not chains:
        return []
    out: list[object] = [Text(f"\nRecompilations ({total})", style="bold")]
    for chain in chains:
        hints: set[str] = set()
        fixes: set[str] = set()
        for step in chain.steps:
            line = Text(f"  [{step.recompile.compile_id}] ", style="dim")
            line.append(f"{step.recompile.function}", style="bold")
            line.append(f" ({step.recompile.file}:{step.recompile.line})", style="cyan")
            out.append(line)
            cause = step.cause
            if cause is None:
                out.append(Text(f"     {step.recompile.reason[:300]}"))
                continue
            out.append(Text(f"     {step.cause_words}" + (f"   <- {cause.source}" if cause.source else "")))
            if step.torch_hint and step.torch_hint not in hints:
                hints.add(step.torch_hint)
                out.append(Text(f"     torch: {step.torch_hint[:300]}", style="dim"))
            out += [Text(f"     also failed: {other}", style="dim") for other in step.also_failed[:3]]
            if step.fix and step.fix not in fixes:  # under the recompile it fixes, once
                fixes.add(step.fix)
                out.append(Text(f"     fix: {step.fix}", style="green"))
        if (h := chain.limit_hit) is not None:
            out.append(Text(f"  {h.function} ({h.file}:{h.line}) hit {h.limit}: {chain.limit_note}", style="bold red"))
            if chain.limit_cause:
                out.append(Text(f"     it wanted to recompile because {chain.limit_cause}"))
        out += [Text(f"     fix: {fix}", style="green") for fix in chain.fixes if fix not in fixes]
    return out


def _compile_time(report: Report) -> list[object]:
    s, totals = report.session, report.analysis.phase_totals
    if not s.compiles:
        return []
    table = Table(title="Compile time", title_justify="left", title_style="bold", box=None, pad_edge=False)
    shown = [p for p in PHASE_NAMES if totals.get(p)] or ["dynamo"]  # only the phases this run had
    for col in ("id", "function", "time (s)", *(PHASE_LABELS[p] for p in shown), "ops", "status"):
        table.add_column(col, justify="right" if col not in ("function", "status") else "left")
    for c in sorted(s.compiles, key=lambda c: -(c.time_s or 0.0))[:15]:
        table.add_row(str(c.compile_id), escape(c.function[:40]), f"{c.time_s or 0:.3f}",
                      *(f"{getattr(c.phases, p):.3f}" for p in shown), str(c.ops or 0), c.status)
    table.add_row("", "total", f"{s.compile_time_s:.3f}", *(f"{totals[p]:.3f}" for p in shown), str(s.ops), "")
    return [Text(""), table]

"""Chart geometry for the HTML report: the compile timeline and the compile-time breakdown.

Contract: pure functions from model values to plain dicts of SVG coordinates (in a fixed
`WIDTH`-wide viewBox); the template only draws them. Text stays data: labels are escaped by the
template like every other string. Lanes are capped so a run with thousands of frames still draws
in a few hundred rectangles per lane, and bars keep a minimum width so a 5 ms compile in a
10-minute run is still visible and clickable.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from pt2doctor.model import Compile
from pt2doctor.model.session import PHASE_LABELS, PHASE_NAMES
from pt2doctor.model.torch_text import ResumeName

WIDTH = 1000
LABEL_W = 230
LANE_H = 22
MAX_LANES = 40
MIN_BAR_W = 3.0
PHASES = PHASE_NAMES


def short_function(name: str) -> str:
    """`torch_dynamo_resume_in_f_at_7` -> `f (resumed at 7)`: the code after a graph break, in words."""
    resume = ResumeName.parse(name)
    return f"{resume.function} (resumed at {resume.line})" if resume else name


def timeline(lanes_by_group: Sequence[tuple[str, Sequence[Compile]]], *, run_start: float | None = None,
             run_wall: float | None = None) -> dict[str, Any]:
    """One lane per (group, function); each compile a bar from its start, split by phase.

    `lanes_by_group` is [("", compiles)] for one process, or [("rank 0", ...), ("rank 1", ...)].
    """
    timed = [c for _, cs in lanes_by_group for c in cs if c.start_s is not None]
    if not timed:
        return {"lanes": [], "height": 0, "ticks": [], "width": WIDTH, "label_w": LABEL_W}
    t0 = min(c.start_s for c in timed if c.start_s is not None)
    if run_start is not None and run_start <= t0:
        t0 = run_start
    t1 = max((c.start_s or 0.0) + (c.time_s or 0.0) for c in timed)
    if run_start is not None and run_wall:
        t1 = max(t1, run_start + run_wall)
    span = max(t1 - t0, 1e-6)
    scale = (WIDTH - LABEL_W - 10) / span
    lanes = _lanes(lanes_by_group)
    out = []
    for i, (label, compiles) in enumerate(lanes):
        y = 24 + i * LANE_H
        out.append({"label": label, "y": y, "bars": [_bar(c, t0, scale, y) for c in compiles if c.start_s is not None]})
    return {"lanes": out, "height": 24 + len(lanes) * LANE_H + 8, "ticks": _ticks(span, scale),
            "width": WIDTH, "label_w": LABEL_W, "span_s": span}


def _lanes(groups: Sequence[tuple[str, Sequence[Compile]]]) -> list[tuple[str, list[Compile]]]:
    lanes: dict[str, list[Compile]] = defaultdict(list)
    for group, compiles in groups:
        for c in compiles:
            name = short_function(c.function)
            lanes[f"{group} · {name}" if group else name].append(c)
    ordered = sorted(lanes.items(), key=lambda kv: min(c.start_s or 0.0 for c in kv[1]))
    if len(ordered) <= MAX_LANES:
        return ordered
    rest = [c for _, cs in ordered[MAX_LANES - 1 :] for c in cs]
    return ordered[: MAX_LANES - 1] + [(f"{len(ordered) - MAX_LANES + 1} more functions", rest)]


def _bar(c: Compile, t0: float, scale: float, y: float) -> dict[str, Any]:
    x = LABEL_W + ((c.start_s or t0) - t0) * scale
    w = max((c.time_s or 0.0) * scale, MIN_BAR_W)
    total = sum(getattr(c.phases, p) for p in PHASES) or 1.0
    segments, sx = [], x
    for p in PHASES:
        sw = w * getattr(c.phases, p) / total
        if sw > 0.05:
            segments.append({"phase": p, "x": round(sx, 2), "w": round(sw, 2)})
            sx += sw
    if not segments:
        segments.append({"phase": "dynamo", "x": round(x, 2), "w": round(w, 2)})
    phases = ", ".join(f"{PHASE_LABELS[p]} {getattr(c.phases, p):.3f}s" for p in PHASES if getattr(c.phases, p))
    tip = f"[{c.compile_id}] {c.function}: {c.time_s or 0.0:.3f}s ({phases or 'no phase times'}), {c.ops or 0} ops"
    if c.compile_id.is_recompile:
        tip += ", recompile"
    if c.graph_breaks:
        tip += f", {c.graph_breaks} graph break(s)"
    if c.status != "ok":
        tip += f", {c.status}"
    return {"cid": str(c.compile_id), "anchor": anchor(str(c.compile_id)), "x": round(x, 2), "y": y + 3,
            "w": round(w, 2), "h": LANE_H - 6, "segments": segments, "tip": tip,
            "recompile": c.compile_id.is_recompile, "breaks": c.graph_breaks, "failed": c.status == "failed"}


def _ticks(span: float, scale: float) -> list[dict[str, Any]]:
    step = _nice_step(span / 8)
    ticks, t = [], 0.0
    while t <= span + 1e-9:
        ticks.append({"x": round(LABEL_W + t * scale, 2), "text": _fmt_seconds(t, step)})
        t += step
    return ticks


def _nice_step(raw: float) -> float:
    for unit in (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800):
        if unit >= raw:
            return float(unit)
    return 3600.0


def _fmt_seconds(t: float, step: float) -> str:
    if step < 0.01:
        return f"{t * 1000:.0f} ms"
    if step < 1:
        return f"{t:.2f} s".replace(".00 s", " s")
    return f"{t:.0f} s"


def breakdown(compiles: Sequence[Compile], *, top: int = 12) -> dict[str, Any]:
    """Compile time per function, stacked by phase; the slowest `top` functions and the rest."""
    per_fn: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(PHASES, 0.0))
    counts: dict[str, int] = defaultdict(int)
    for c in compiles:
        counts[c.function] += 1
        for p in PHASES:
            per_fn[c.function][p] += getattr(c.phases, p)
    rows = sorted(per_fn.items(), key=lambda kv: -sum(kv[1].values()))
    if len(rows) > top:
        rest: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        for _, phases in rows[top - 1 :]:
            for p in PHASES:
                rest[p] += phases[p]
        rows = rows[: top - 1] + [(f"{len(rows) - top + 1} other functions", rest)]
    longest = max((sum(v.values()) for _, v in rows), default=0.0) or 1.0
    scale = (WIDTH - LABEL_W - 90) / longest
    out = []
    for i, (fn, phases) in enumerate(rows):
        y, x = 6 + i * LANE_H, float(LABEL_W)
        segments = []
        for p in PHASES:
            w = phases[p] * scale
            if w > 0.05:
                segments.append({"phase": p, "x": round(x, 2), "w": round(w, 2), "s": phases[p]})
                x += w
        total = sum(phases.values())
        tip = f"{fn}: {total:.3f}s over {counts.get(fn, 0) or '?'} compile(s); " + ", ".join(
            f"{PHASE_LABELS[p]} {phases[p]:.3f}s" for p in PHASES)
        out.append({"label": short_function(fn), "y": y, "segments": segments, "total": total, "end": round(x, 2),
                    "tip": tip})
    return {"rows": out, "height": 12 + len(out) * LANE_H, "width": WIDTH, "label_w": LABEL_W}


def anchor(compile_id: str) -> str:
    return "cid-" + compile_id.replace("/", "-")

"""A job of several processes as one self-contained HTML page: per-rank lanes (each rank's compiles on one time
axis, and its collectives), where the ranks' collectives part and the sequence around it, where each rank was at
the timeout, and how each rank departs from the reference with every consequence (the terminal says one).

Contract: `render_job_html(job) -> str` is pure and formats only; the page reuses the process report's styles
and needs no script or network. Every string from the program is escaped (Jinja2 autoescape).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pt2doctor.model.collectives import CollectiveCall
from pt2doctor.model.job import Job
from pt2doctor.report.compare import TITLES
from pt2doctor.report.html import environment, inline_asset
from pt2doctor.report.ranks import describe_call, render_parting, sentence, unrecorded_text

LANE_WIDTH = 960  # px of the time axis
AROUND = 12  # collectives shown before the parting (all of them when there are few)
MANY = 200


@dataclass(frozen=True, slots=True)
class _Bar:
    x: float
    width: float
    ok: bool
    title: str


def render_job_html(job: Job) -> str:
    template = environment().get_template("job.html.j2")
    return template.render(job=job, lanes=_lanes(job), sequence=_sequence(job), titles=TITLES,
                           parting=render_parting(job.parting) if job.parting else [],
                           unrecorded=unrecorded_text(job) if job.unrecorded else None, css=inline_asset("report.css"),
                           describe=describe_call, sentence=sentence, width=LANE_WIDTH)


def _lanes(job: Job) -> list[tuple[str, list[_Bar]]]:
    starts = [c.start_s for p in job.processes for c in p.session.compiles if c.start_s is not None]
    if not starts:
        return []
    origin = min(starts)
    end = max(c.start_s + (c.time_s or 0.0) for p in job.processes for c in p.session.compiles
              if c.start_s is not None)
    scale = LANE_WIDTH / max(end - origin, 1e-3)
    return [(p.label, [_Bar((c.start_s - origin) * scale, max((c.time_s or 0.0) * scale, 2.0),
                            c.status == "ok" and (c.ops or 0) > 0,
                            f"{c.function} [{c.compile_id}] {c.time_s or 0.0:.2f} s, {c.ops or 0} ops, {c.status}")
                       for c in p.session.compiles if c.start_s is not None]) for p in job.processes]


def _sequence(job: Job) -> tuple[list[str], list[tuple[int, bool, list[CollectiveCall | None]]]]:
    """The ranks' collectives of the parting's group (else the default group), by sequence number: from a few
    before the parting, or all of them when there are few."""
    recorded = [p for p in job.processes if p.collectives is not None]
    if not recorded:
        return [], []
    group = job.parting.group if job.parting is not None else "0"
    by_rank = [{c.seq: c for c in p.collectives.calls if c.group == group} for p in recorded if p.collectives]
    seqs = sorted({s for calls in by_rank for s in calls})
    at = job.parting.seq if job.parting is not None else None
    if len(seqs) > MANY:
        seqs = [s for s in seqs if at is None or at - AROUND <= s <= at + AROUND] or seqs[-MANY:]
    return [p.label for p in recorded], [(s, s == at, [calls.get(s) for calls in by_rank]) for s in seqs]


def write_job_html(job: Job, path: Path) -> Path:
    """Write the page to `path` (a file, or `report.html` inside a directory); return the file written."""
    target = path / "report.html" if path.is_dir() else path
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(render_job_html(job), encoding="utf-8")
    tmp.replace(target)
    return target

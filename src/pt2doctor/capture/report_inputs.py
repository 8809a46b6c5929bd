"""Gather what the HTML page shows beyond the session: trace artifacts, per-rank compiles, source lines.

Contract: `collect_html_inputs(session, limits)` is the only I/O of the HTML report. It streams the
session's TORCH_TRACE once (memory stays flat: a payload is read only when its kind is shown, and
never more than `limits.artifact_bytes` of it) and reads a few lines of user source around each
graph break. Everything it returns is plain data; `report.html.render_html` formats it without I/O.
A missing or unreadable trace or source file gives empty inputs, never an error: a report on a
session.json copied to another machine still renders.

The trace is read through `capture.trace.trace_reader`, the one place trace lines are parsed; the values
it returns are `model.report_inputs`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pt2doctor.model import Compile, Session
from pt2doctor.model.report_inputs import ArtifactText, HtmlInputs, HtmlLimits, Snippet

if TYPE_CHECKING:  # the events load with the trace reader, only when a trace is read
    from pt2doctor.capture.trace.events import Event

# Artifact kind -> tab label, in the order the page shows them (the pipeline's order).
ARTIFACT_LABELS: dict[str, str] = {
    "dynamo_output_graph": "Dynamo graph",
    "aot_joint_graph": "AOT joint graph",
    "aot_forward_graph": "AOT forward graph",
    "aot_backward_graph": "AOT backward graph",
    "aot_inference_graph": "AOT inference graph",
    "inductor_post_grad_graph": "Inductor post-grad graph",
    "inductor_output_code": "Inductor output code",
    "dynamo_cpp_guards_str": "Guards",
}
CACHE_KINDS: dict[str, str] = {
    "fx_graph_cache_hit": "FX graph cache: hit",
    "fx_graph_cache_miss": "FX graph cache: miss",
    "fx_graph_cache_bypass": "FX graph cache: bypass",
    "aotautograd_cache_hit": "AOTAutograd cache: hit",
    "aotautograd_cache_miss": "AOTAutograd cache: miss",
    "aotautograd_cache_bypass": "AOTAutograd cache: bypass",
}
_SNIPPET_CONTEXT = 3


def collect_html_inputs(session: Session, limits: HtmlLimits | None = None) -> HtmlInputs:
    limits = limits or HtmlLimits()
    scan = _scan_trace(session, limits)
    return HtmlInputs(artifacts=scan.artifacts, cache_events=scan.cache, rank_compiles=scan.rank_compiles(),
                      snippets=_snippets(session, limits.snippets), omitted_artifacts=scan.omitted)


@dataclass(slots=True)
class _Scan:
    limits: HtmlLimits
    artifacts: dict[tuple[int | None, str], tuple[ArtifactText, ...]] = field(default_factory=dict)
    cache: dict[tuple[int | None, str], tuple[str, ...]] = field(default_factory=dict)
    per_rank: dict[int, list[Event]] = field(default_factory=lambda: defaultdict(list))
    used: int = 0
    omitted: int = 0

    def rank_compiles(self) -> dict[int, tuple[Compile, ...]]:
        if len(self.per_rank) < 2:
            return {}
        from pt2doctor.capture.trace.session_builder import build_session

        return {rank: tuple(build_session(events).compiles) for rank, events in sorted(self.per_rank.items())}


def _scan_trace(session: Session, limits: HtmlLimits) -> _Scan:
    scan = _Scan(limits)
    paths = _trace_paths(session)
    if not paths:
        return scan
    from pt2doctor.capture.trace import events as ev
    from pt2doctor.capture.trace.trace_reader import read_trace

    for path in paths:
        try:
            for event in read_trace(path):
                if isinstance(event, (ev.DynamoStart, ev.CompilationMetrics)) and event.rank is not None:
                    scan.per_rank[event.rank].append(event)
                elif isinstance(event, ev.Artifact) and event.compile_id is not None:
                    _on_artifact(scan, event)
        except OSError:
            continue
    return scan


def _trace_paths(session: Session) -> list[Path]:
    """Each trace file once: the run directory's `trace/` if it is still there, else the listed files."""
    files = [Path(f) for f in session.trace.files if Path(f).is_file()]
    return list(dict.fromkeys(files))


def _on_artifact(scan: _Scan, event: object) -> None:
    kind, cid, rank, payload = event.kind, event.compile_id, event.rank, event.payload  # type: ignore[attr-defined]
    # Keyed like `Session.compiles`: a restarted attempt (`0/0_1`, after a graph break) is its compile.
    key = (rank, str(cid.compile))
    if kind in CACHE_KINDS:
        scan.cache[key] = scan.cache.get(key, ()) + (CACHE_KINDS[kind],)
        return
    if kind not in ARTIFACT_LABELS or payload is None:
        return
    if scan.used >= scan.limits.total_bytes:
        scan.omitted += 1
        return
    text, truncated = read_capped(payload.path, payload.offset, payload.length, scan.limits.artifact_bytes)
    scan.used += len(text)
    item = ArtifactText(kind, ARTIFACT_LABELS[kind], text, payload.length, truncated)
    scan.artifacts[key] = scan.artifacts.get(key, ()) + (item,)


def read_capped(path: str, offset: int, length: int, cap: int) -> tuple[str, bool]:
    """A trace payload (tab-indented lines) as text, reading at most `cap` bytes of it."""
    with open(path, "rb") as handle:
        handle.seek(offset)
        raw = handle.read(min(length, cap))
    truncated = length > cap
    if truncated:
        raw = raw[: raw.rfind(b"\n") + 1] or raw
    lines = raw.decode("utf-8", "replace").split("\n")
    return "\n".join(line[1:] if line.startswith("\t") else line for line in lines if line).rstrip(), truncated


def _snippets(session: Session, cap: int) -> dict[tuple[str, int], Snippet]:
    wanted: list[tuple[str, int]] = [(b.file, b.line) for b in session.graph_breaks]
    wanted += [(f.file, f.line) for f in session.failures if f.file and f.line]
    out: dict[tuple[str, int], Snippet] = {}
    for file, line in list(dict.fromkeys(wanted))[:cap]:
        snippet = read_snippet(file, line, cwd=session.cwd)
        if snippet is not None:
            out[(file, line)] = snippet
    return out


def read_snippet(file: str, line: int, *, cwd: str = "", context: int = _SNIPPET_CONTEXT) -> Snippet | None:
    path = Path(file)
    if not path.is_absolute() and cwd:
        path = Path(cwd) / path
    if line <= 0 or file.startswith("<") or not path.is_file():
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            source = handle.read(2_000_000).splitlines()
    except OSError:
        return None
    if line > len(source):
        return None
    first = max(1, line - context)
    return Snippet(file, line, first, tuple(source[first - 1 : line + context]))

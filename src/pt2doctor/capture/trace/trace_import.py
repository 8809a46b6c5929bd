"""A session from a plain TORCH_TRACE file or directory produced by any torch run (no child facts)."""

from __future__ import annotations

from pathlib import Path

from pt2doctor.capture.process_meta import with_code
from pt2doctor.capture.trace.session_builder import build_session
from pt2doctor.capture.trace.trace_reader import TraceCounters, read_trace
from pt2doctor.model import SCHEMA, Environment, ExitInfo, Extras, Session, TraceStats


def session_from_trace(path: Path, *, strict: bool = False) -> Session:
    counters = TraceCounters()
    facts = build_session(read_trace(path, counters, strict=strict))
    return Session(
        schema=SCHEMA, torch_version=facts.torch_version, command=(), exit=ExitInfo(code=None),
        compiles=tuple(facts.compiles), graph_breaks=tuple(with_code(facts.graph_breaks)),
        recompiles=tuple(facts.recompiles), failures=tuple(facts.compile_failures),
        limit_hits=tuple(facts.limit_hits),
        trace=TraceStats(files=tuple(counters.files), lines=counters.lines, events=counters.events,
                         unreadable=counters.unreadable, unknown=counters.unknown, ranks=tuple(sorted(counters.ranks))),
        environment=Environment(torch=facts.torch_version), extras=Extras(source="trace"),
    )

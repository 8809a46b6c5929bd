"""Sessions from a plain TORCH_TRACE file or directory produced by any torch run (no child facts).

`session_from_trace(path)`: everything at `path` as one session. `process_sessions(path)`: one session
per process that wrote a trace file (torch writes one file per process, named with its rank under
torchrun), read in parallel; compiles of different processes are never merged by compile id.
"""

from __future__ import annotations

import re
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path

from pt2doctor.capture.process_meta import with_code
from pt2doctor.capture.trace.session_builder import build_session
from pt2doctor.capture.trace.trace_reader import TraceCounters, read_trace, trace_files
from pt2doctor.model import SCHEMA, Environment, ExitInfo, Extras, Session, TraceStats
from pt2doctor.model.job import ProcessSession
from pt2doctor.model.serialize import dumps, loads
from pt2doctor.model.settings import default_jobs

_PID = re.compile(rb"^[VIWEC]\d{4} [\d:.]+ (\d+) ")  # glog's prefix: level, date, time, thread/process id


def session_from_trace(path: Path, *, strict: bool = False) -> Session:
    counters = TraceCounters()
    facts = build_session(read_trace(path, counters, strict=strict))
    return Session(
        schema=SCHEMA, torch_version=facts.torch_version, command=(), exit=ExitInfo(code=None),
        compiles=tuple(facts.compiles), graph_breaks=tuple(with_code(facts.graph_breaks)),
        recompiles=tuple(facts.recompiles), failures=tuple(facts.compile_failures),
        limit_hits=tuple(facts.limit_hits), graph_execution=facts.graph_execution,
        trace=TraceStats(files=tuple(counters.files), lines=counters.lines, events=counters.events,
                         unreadable=counters.unreadable, unknown=counters.unknown, ranks=tuple(sorted(counters.ranks))),
        environment=Environment(torch=facts.torch_version), extras=Extras(source="trace"),
    )


def process_sessions(path: Path, *, strict: bool = False, jobs: int | None = None) -> tuple[ProcessSession, ...]:
    """One session per trace file at `path`, labelled by rank (or by pid), lowest rank first."""
    files = trace_files(path)
    workers = min(len(files), jobs or default_jobs())
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            # a session crosses the process boundary as session.json's bytes (the model's own codec)
            sessions = [loads(data, Session) for data in pool.map(partial(_session_json, strict=strict), files)]
    else:
        sessions = [session_from_trace(f, strict=strict) for f in files]
    found = [_process(f, s) for f, s in zip(files, sessions)]
    return tuple(sorted(found, key=lambda p: (p.rank is None, p.rank or 0, p.pid or 0)))


def _session_json(file: Path, strict: bool) -> bytes:
    return dumps(session_from_trace(file, strict=strict))


def _process(file: Path, session: Session) -> ProcessSession:
    rank = session.trace.ranks[0] if len(session.trace.ranks) == 1 else None
    pid = _first_pid(file)
    label = f"rank {rank}" if rank is not None else f"pid {pid}" if pid is not None else file.stem
    return ProcessSession(label, rank, pid, session)


def _first_pid(file: Path) -> int | None:
    with open(file, "rb") as handle:
        for line in handle:
            match = _PID.match(line)
            if match:
                return int(match.group(1))
    return None

"""Structured-trace log lines -> typed events: the one place raw trace lines are parsed.

Contract:
- `read_trace(path)` streams one file or every `*.log` file of a TORCH_TRACE directory and yields
  `capture.trace.events` values in file order. Memory stays flat: payload lines of events nobody reads
  are skipped, and only their byte span is kept (`PayloadRef`).
- A line that cannot be parsed (truncated, corrupted) is counted in `TraceStats.unreadable` and
  skipped; with `strict=True` it raises `TraceError` instead.
- The format: `<L><MMDD> <HH:MM:SS.us> <pid> <path>:<line>] {json metadata}` followed by
  tab-indented payload lines (torch/_logging/_internal.py, `TorchLogsFormatter(trace=True)`).
  `{"str": [text, id]}` lines intern file names used by stacks.
- Compile ids are unique in a file: an event's id carries its reset generation (`CompileId.generation`),
  the number of `torch._dynamo.reset()` calls before it in that file (one file is one process). A reset
  is the child's mark (`RESET_ARTIFACT`), or, in a trace pt2doctor did not write, a `dynamo_start` of a
  compile id already started since the last reset (torch restarts its counters; nothing else repeats one).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from pt2doctor.capture.trace import events as ev
from pt2doctor.model.ids import RESET_ARTIFACT, CompileId, SourceLoc

_RESERVED = frozenset(
    {"rank", "compiled_autograd_id", "frame_id", "frame_compile_id", "attempt", "has_payload",
     "stack", "severity", "timestamp", "pathname", "thread", "subgraph_name"}
)
# Payloads read eagerly because the session needs them; every other payload stays on disk.
_EAGER_PAYLOADS = frozenset({"dynamo_graph_break_reason", "recompile_reasons", "dynamo_error"})
_RANK_IN_NAME = re.compile(r"rank_(\d+)")
_decode = msgspec.json.Decoder().decode


class TraceError(Exception):
    """A trace line could not be read and the caller asked for `strict` reading."""


@dataclass(slots=True)
class TraceCounters:
    files: list[str] = field(default_factory=list)
    lines: int = 0
    events: int = 0
    unreadable: int = 0
    unknown: int = 0
    ranks: set[int] = field(default_factory=set)


def trace_files(path: Path) -> list[Path]:
    """The trace files at `path`: the file itself, or a directory's `*.log` files, rank order."""
    if path.is_file():
        return [path]
    files = sorted(p for p in path.rglob("*.log") if p.is_file())
    return sorted(files, key=lambda p: (rank_of(p) or 0, p.name))


def rank_of(path: Path) -> int | None:
    match = _RANK_IN_NAME.search(path.name)
    return int(match.group(1)) if match else None


def read_trace(path: Path, counters: TraceCounters | None = None, *, strict: bool = False) -> Iterator[ev.Event]:
    counters = counters if counters is not None else TraceCounters()
    for file in trace_files(path):
        counters.files.append(str(file))
        yield from _read_file(file, counters, strict)


@dataclass(slots=True)
class _Generations:
    """The reset generation of one file's events, as they come (see the module's contract)."""

    current: int = 0
    started: set[CompileId] = field(default_factory=set)  # since the last reset

    def place(self, kind: str, header: dict[str, Any], cid: CompileId | None) -> CompileId | None:
        """`cid` (as torch wrote it) in the generation it belongs to, the generation moved on where this
        event shows a reset."""
        artifact = header.get("artifact")
        if isinstance(artifact, dict) and artifact.get("name") == RESET_ARTIFACT:
            self._reset()
        elif kind == "dynamo_start" and cid is not None:
            if cid in self.started:
                self._reset()
            self.started.add(cid)
        return cid.in_generation(self.current) if cid is not None and self.current else cid

    def _reset(self) -> None:
        self.current += 1
        self.started.clear()


def _read_file(path: Path, counters: TraceCounters, strict: bool) -> Iterator[ev.Event]:
    strings: dict[int, str] = {}
    generations = _Generations()
    file_rank = rank_of(path)
    pending: tuple[dict[str, Any], int, int] | None = None  # header, payload offset, line number
    payload_lines: list[bytes] | None = None
    payload_len = 0
    offset = 0
    with open(path, "rb") as handle:
        for lineno, line in enumerate(handle, 1):
            offset += len(line)
            counters.lines += 1
            if line.startswith(b"\t"):
                if pending is not None:
                    payload_len += len(line)
                    if payload_lines is not None:
                        payload_lines.append(line)
                continue
            if pending is not None:
                yield from _emit(pending, payload_lines, payload_len, path, strings, file_rank, counters, generations)
                pending = None
            header = _parse_header(line)
            if header is None:
                if line.strip():
                    counters.unreadable += 1
                    if strict:
                        raise TraceError(f"{path}:{lineno}: unreadable trace line: {line[:120]!r}")
                continue
            pending = (header, offset, lineno)
            payload_lines = [] if _payload_wanted(header) else None
            payload_len = 0
        if pending is not None:
            yield from _emit(pending, payload_lines, payload_len, path, strings, file_rank, counters, generations)


def _parse_header(line: bytes) -> dict[str, Any] | None:
    cut = line.find(b"] {")
    if cut < 0:
        return None
    try:
        value = _decode(line[cut + 2 :])
    except msgspec.DecodeError:
        return None
    return value if isinstance(value, dict) else None


def _kind(header: dict[str, Any]) -> str:
    for key in header:
        if key not in _RESERVED:
            return key
    return "?"


def _payload_wanted(header: dict[str, Any]) -> bool:
    artifact = header.get("artifact")
    return isinstance(artifact, dict) and artifact.get("name") in _EAGER_PAYLOADS


def _emit(pending, payload_lines, payload_len, path, strings, file_rank, counters, generations) -> Iterator[ev.Event]:
    header, payload_offset, _lineno = pending
    kind = _kind(header)
    if kind == "str":
        text, key = header["str"]
        strings[key] = text
        return
    counters.events += 1
    rank = header.get("rank", file_rank)
    if rank is not None:
        counters.ranks.add(rank)
    compile_id = generations.place(kind, header, _compile_id(header))
    base = _Base(compile_id, rank, path, payload_offset, payload_len, payload_lines, strings, generations.current)
    handler = _HANDLERS.get(kind)
    if kind == "artifact":
        name = header["artifact"].get("name", "")
        handler = _ARTIFACT_HANDLERS.get(name, _generic_artifact(name))
    if handler is None:
        handler = _unknown(kind) if kind not in _PAYLOAD_KINDS else _generic_artifact(kind)
    event = handler(base, header.get(kind) if kind != "artifact" else header["artifact"])
    if isinstance(event, ev.UnknownEvent):
        counters.unknown += 1
    yield event


@dataclass(slots=True)
class _Base:
    compile_id: CompileId | None
    rank: int | None
    path: Path
    payload_offset: int
    payload_len: int
    payload_lines: list[bytes] | None
    strings: dict[int, str]
    generation: int

    def text(self) -> str:
        lines = self.payload_lines or []
        return "".join(line[1:].decode("utf-8", "replace") for line in lines).rstrip("\n")

    def ref(self) -> ev.PayloadRef | None:
        if not self.payload_len:
            return None
        return ev.PayloadRef(str(self.path), self.payload_offset, self.payload_len)

    def common(self) -> dict[str, Any]:
        return {"compile_id": self.compile_id, "rank": self.rank, "timestamp": None, "generation": self.generation}


def _compile_id(header: dict[str, Any]) -> CompileId | None:
    frame, fcid = header.get("frame_id"), header.get("frame_compile_id")
    if frame is None or fcid is None:
        return None
    autograd = header.get("compiled_autograd_id")
    return CompileId(int(frame), int(fcid), int(header.get("attempt") or 0),
                     int(autograd) if autograd is not None else None)


def _stack(base: _Base, frames: Any) -> tuple[SourceLoc, ...]:
    out = []
    for frame in frames or ():
        name = frame.get("filename")
        file = base.strings.get(name, str(name)) if isinstance(name, int) else str(name)
        out.append(SourceLoc(file, int(frame.get("line") or 0), str(frame.get("name", "")), str(frame.get("loc", ""))))
    return tuple(out)


def _dynamo_start(base: _Base, meta: Any) -> ev.Event:
    return ev.DynamoStart(**base.common(), stack=_stack(base, (meta or {}).get("stack")))


def _metrics(base: _Base, meta: Any) -> ev.Event:
    metrics = dict(meta or {})
    cid = base.compile_id
    if cid is None and isinstance(metrics.get("compile_id"), str):
        try:
            cid = CompileId.parse(metrics["compile_id"]).in_generation(base.generation)
        except ValueError:
            cid = None
    return ev.CompilationMetrics(cid, base.rank, metrics.get("start_time"), base.generation, metrics=metrics)


def _graph_break(base: _Base, meta: Any) -> ev.Event:
    return ev.GraphBreakReason(**base.common(), text=base.text())


def _recompile_reasons(base: _Base, meta: Any) -> ev.Event:
    text = base.text()
    try:
        value = msgspec.json.decode(text)
        reasons = tuple(str(r) for r in value) if isinstance(value, list) else (str(value),)
    except msgspec.DecodeError:
        reasons = (text,) if text else ()
    return ev.RecompileReasons(**base.common(), reasons=reasons)


def _dynamo_error(base: _Base, meta: Any) -> ev.Event:
    return ev.DynamoError(**base.common(), text=base.text())


def _generic_artifact(name: str) -> Callable[[_Base, Any], ev.Event]:
    def make(base: _Base, meta: Any) -> ev.Event:
        return ev.Artifact(**base.common(), kind=name, payload=base.ref())

    return make


def _unknown(kind: str) -> Callable[[_Base, Any], ev.Event]:
    def make(base: _Base, meta: Any) -> ev.Event:
        raw = meta if isinstance(meta, dict) else {"value": meta}
        return ev.UnknownEvent(**base.common(), kind=kind, raw=raw)

    return make


# Dispatch tables: trace key -> handler; artifact name -> handler.
_HANDLERS: dict[str, Callable[[_Base, Any], ev.Event]] = {
    "dynamo_start": _dynamo_start,
    "compilation_metrics": _metrics,
    "bwd_compilation_metrics": _metrics,  # a backward graph compiled at `backward()` (its `is_forward` is False)
}
_ARTIFACT_HANDLERS: dict[str, Callable[[_Base, Any], ev.Event]] = {
    "dynamo_graph_break_reason": _graph_break,
    "recompile_reasons": _recompile_reasons,
    "dynamo_error": _dynamo_error,
}
# Keys whose events are payload carriers worth keeping (graphs, code, guards) rather than unknown.
_PAYLOAD_KINDS = frozenset(
    {"dynamo_output_graph", "aot_forward_graph", "aot_backward_graph", "aot_inference_graph",
     "aot_joint_graph", "inductor_output_code", "inductor_post_grad_graph", "inductor_pre_grad_graph",
     "dynamo_cpp_guards_str", "dynamo_guards", "optimize_ddp_split_graph", "compiled_autograd_graph",
     "graph_break", "chromium_event", "describe_tensor", "describe_storage", "describe_source",
     "create_symbol", "guard_added", "guard_added_fast", "propagate_real_tensors", "symbolic_shape_specialization",
     "aot_autograd_backward_compilation_metrics", "link", "missing_fake_kernel",
     "mismatched_fake_kernel", "expression_created", "unbacked_symbol", "exported_program"}
)

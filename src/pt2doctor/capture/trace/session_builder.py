"""Fold trace events into a `Session`: compiles, graph breaks, recompiles, limit hits, failures.

Contract: `build_session(events, ...)` is a pure fold over `capture.trace.events` values (no I/O of its
own beyond lazily read payloads) and returns the trace-derived parts of a `Session`. Graph breaks
are deduplicated by (break type, user file:line) across frames, compiles and ranks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec

from pt2doctor.capture.trace import events as ev
from pt2doctor.capture.trace.guard_text import parse_guard_failure
from pt2doctor.capture.trace.parse_text import parse_break_text
from pt2doctor.model import Category, Compile, CompileId, Failure, GraphBreak, LimitHit, Phases, Recompile, SourceLoc
from pt2doctor.model.session import CompileStatus, FailureOrigin
from pt2doctor.model.torch_text import GRAPH_BREAK_EXCEPTIONS, compile_failure_line, is_limit_hit


@dataclass(slots=True)
class TraceFacts:
    """What a trace says, before it is combined with what the child process reported."""

    compiles: list[Compile] = field(default_factory=list)
    graph_breaks: list[GraphBreak] = field(default_factory=list)
    recompiles: list[Recompile] = field(default_factory=list)
    limit_hits: list[LimitHit] = field(default_factory=list)
    compile_failures: list[Failure] = field(default_factory=list)
    torch_version: str | None = None
    artifacts: list[ev.Artifact] = field(default_factory=list)
    graph_execution: tuple[CompileId, ...] = ()  # the compiled graphs in the order they ran, where torch logged it


def build_session(events: Iterable[ev.Event], *, keep_artifacts: bool = False) -> TraceFacts:
    fold = _Fold(keep_artifacts)
    for event in events:
        handler = _DISPATCH.get(type(event))
        if handler is not None:
            handler(fold, event)
    return fold.finish()


@dataclass(slots=True)
class _Fold:
    keep_artifacts: bool
    facts: TraceFacts = field(default_factory=TraceFacts)
    starts: dict[tuple[int | None, CompileId], SourceLoc] = field(default_factory=dict)
    breaks: dict[tuple[str, str, int], GraphBreak] = field(default_factory=dict)
    reasons: dict[tuple[int | None, CompileId], tuple[str, ...]] = field(default_factory=dict)
    compiles: dict[tuple[int | None, CompileId], Compile] = field(default_factory=dict)
    collectives: dict[tuple[int | None, CompileId], tuple[str, ...]] = field(default_factory=dict)
    inputs: dict[tuple[int | None, CompileId], tuple[str, ...]] = field(default_factory=dict)
    schedules: dict[tuple[int | None, CompileId], tuple[str, ...]] = field(default_factory=dict)
    outputs: dict[tuple[int | None, CompileId], tuple[str, ...]] = field(default_factory=dict)
    runtimes: dict[tuple[int | None, CompileId], float] = field(default_factory=dict)
    output_code: dict[tuple[int | None, CompileId], list[ev.PayloadRef]] = field(default_factory=dict)

    def finish(self) -> TraceFacts:
        compiles = (replace(c, collectives=self.collectives.get(key, ()), inputs=self.inputs.get(key, ()),
                            collective_schedule=self.schedules.get(key, ()),
                            collective_outputs=self.outputs.get(key, ()),
                            estimated_runtime_ns=self.runtimes.get(key), code_collectives=self._code_collectives(key))
                    for key, c in self.compiles.items())
        self.facts.compiles = sorted(compiles, key=lambda c: (c.start_s or 0.0, c.compile_id))
        self.facts.graph_breaks = sorted(self.breaks.values(), key=lambda b: (-b.count, b.file, b.line))
        return self.facts

    def _code_collectives(self, key: tuple[int | None, CompileId]) -> tuple[str, ...]:
        """The collectives a graph's output code calls, read only for a graph Inductor scheduled collectives
        in (output code is most of a trace's bytes, and most graphs have none)."""
        if key not in self.schedules:
            return ()
        return tuple(m[1] for ref in self.output_code.get(key, ()) for line in ref.read().splitlines()
                     if not line.lstrip().startswith("#") for m in _CODE_COLLECTIVE.finditer(line))


def _on_start(fold: _Fold, event: ev.DynamoStart) -> None:
    if event.compile_id is not None and event.stack:
        fold.starts[(event.rank, _frame_key(event.compile_id))] = event.stack[-1]


def _frame_key(cid: CompileId) -> CompileId:
    return cid.compile


def _on_break(fold: _Fold, event: ev.GraphBreakReason) -> None:
    _add_break(fold, event.text, event.compile_id, fatal=False)


def _add_break(fold: _Fold, text: str, cid: CompileId | None, *, fatal: bool, where: SourceLoc | None = None) -> None:
    parsed = parse_break_text(text)
    loc = where or parsed.where or SourceLoc("<unknown>", 0)
    function = loc.function or (parsed.user_stack[-1].function if parsed.user_stack else "")
    key = (parsed.break_type or parsed.reason, loc.file, loc.line)
    ids = (_frame_key(cid),) if cid is not None else ()
    known = fold.breaks.get(key)
    if known is not None:
        new_ids = known.compile_ids + tuple(i for i in ids if i not in known.compile_ids)
        fold.breaks[key] = replace(known, count=known.count + 1, compile_ids=new_ids, fatal=known.fatal or fatal)
        return
    fold.breaks[key] = GraphBreak(
        reason=parsed.reason, file=loc.file, line=loc.line, function=function, count=1, hints=parsed.hints,
        break_type=parsed.break_type, explanation=parsed.explanation, code=loc.code, gb_id=parsed.gb_id,
        gb_url=parsed.gb_url, compile_ids=ids, user_stack=parsed.user_stack, fatal=fatal,
    )


def _on_reasons(fold: _Fold, event: ev.RecompileReasons) -> None:
    if event.compile_id is not None:
        fold.reasons[(event.rank, _frame_key(event.compile_id))] = event.reasons


def _on_metrics(fold: _Fold, event: ev.CompilationMetrics) -> None:
    m, cid = event.metrics, event.compile_id
    if cid is None or m.get("is_runtime"):
        return
    key = (event.rank, _frame_key(cid))
    function, file, line = _code_of(fold, key, m)
    fail_type, fail_reason = m.get("fail_type"), m.get("fail_reason")
    if fail_reason and is_limit_hit(fail_type or "", fail_reason):
        _on_limit_hit(fold, key, function, file, line, fail_reason, fatal=fail_type == "FailOnRecompileLimitHit")
        return
    known = fold.compiles.get(key)
    if m.get("is_forward") is False:  # a backward graph compiled at `backward()`: part of its frame's compile
        if known is not None:
            fold.compiles[key] = _add_backward(known, m)
        if fail_type:  # a compile failure, caught by the script or not
            _on_compile_failure(fold, cid, m, fail_type, fail_reason or "", function, "backward_compile")
        return
    fold.compiles[key] = _compile(cid, function, file, line, m)
    if fail_type:
        _on_compile_failure(fold, cid, m, fail_type, fail_reason or "", function)
    recompile_reason = m.get("recompile_reason")
    if cid.frame_compile > 0 or recompile_reason:
        reasons = fold.reasons.get(key) or ((recompile_reason,) if recompile_reason else ())
        failures = tuple(parse_guard_failure(r, cid.generation) for r in reasons)
        fold.facts.recompiles.append(
            Recompile(function, file, line, _frame_key(cid), reasons[0] if reasons else "", failures))


def _compile(cid: CompileId, function: str, file: str, line: int, m: dict[str, Any]) -> Compile:
    status: CompileStatus = "failed" if m.get("fail_type") else ("ok" if m.get("graph_op_count") else "empty")
    hits = sum(int(m.get(k) or 0) for k in ("inductor_fx_local_cache_hit_count", "aotautograd_local_cache_hit_count"))
    misses = sum(int(m.get(k) or 0)
                 for k in ("inductor_fx_local_cache_miss_count", "aotautograd_local_cache_miss_count"))
    return Compile(
        compile_id=_frame_key(cid), function=function, file=file, line=line, ops=m.get("graph_op_count"),
        time_s=m.get("entire_frame_compile_time_s"), status=status, phases=phase_times(m), start_s=m.get("start_time"),
        graph_breaks=len(m.get("restart_reasons") or ()), fail_type=m.get("fail_type"),
        fail_reason=m.get("fail_reason"), cache_hits=hits, cache_misses=misses,
    )


def phase_times(m: dict[str, Any]) -> Phases:
    """Exclusive phase times from torch's nested cumulative ones. torch's `aot_autograd_cumulative` field
    times the whole backend call (torch 2.11-2.13: the same as `backend_compile_time_s`), so it is AOTAutograd
    only where Inductor's own times split it; a cache hit makes the backend call a load."""
    us = [float(m.get(k) or 0) / 1e6 for k in (
        "dynamo_cumulative_compile_time_us", "aot_autograd_cumulative_compile_time_us",
        "inductor_cumulative_compile_time_us", "inductor_code_gen_cumulative_compile_time_us")]
    total = us[0] or float(m.get("entire_frame_compile_time_s") or 0)
    backend = us[1] or float(m.get("backend_compile_time_s") or 0)
    ind, gen = us[2], us[3]
    dynamo = max(total - backend, 0.0)
    if int(m.get("aotautograd_local_cache_hit_count") or 0):
        return Phases(dynamo=dynamo, cache_load=backend)
    if int(m.get("inductor_fx_local_cache_hit_count") or 0):
        return Phases(dynamo=dynamo, aot=max(backend - ind, 0.0), cache_load=ind)
    if ind:
        return Phases(dynamo=dynamo, aot=max(backend - ind, 0.0), inductor=max(ind - gen, 0.0), codegen=gen)
    return Phases(dynamo=dynamo, backend=backend)


def _add_backward(known: Compile, m: dict[str, Any]) -> Compile:
    """A backward graph compiled later (at `loss.backward()`): its backend time joins the frame's."""
    extra = phase_times(m)
    phases = known.phases.plus(replace(extra, dynamo=0.0, aot=extra.aot + extra.dynamo))
    time = (known.time_s or 0.0) + float(m.get("entire_frame_compile_time_s") or 0.0)
    return replace(known, phases=phases, time_s=time)


def _code_of(fold: _Fold, key, m: dict[str, Any]) -> tuple[str, str, int]:
    """(function, file, first line) of the compiled code: from the metrics, else from the frame's other
    compiles (a compile refused at the recompile limit has no code fields), else from its start."""
    if m.get("co_name"):
        return m["co_name"], m.get("co_filename") or "?", int(m.get("co_firstlineno") or 0)
    same_frame = [c for (rank, cid), c in fold.compiles.items() if rank == key[0] and cid.frame_key == key[1].frame_key]
    if same_frame:
        return same_frame[0].function, same_frame[0].file, same_frame[0].line
    start = fold.starts.get(key)
    return (start.function, start.file, start.line) if start else ("?", "?", 0)


def _on_limit_hit(fold: _Fold, key, function: str, file: str, line: int, reason: str, *, fatal: bool) -> None:
    limit = "accumulated_recompile_limit" if "accumulated" in reason else "recompile_limit"
    failures = tuple(parse_guard_failure(r, key[1].generation) for r in fold.reasons.get(key, ()))
    fold.facts.limit_hits.append(
        LimitHit(function, file, line, key[1], limit, reason.splitlines()[0], fatal=fatal, guard_failures=failures))


def is_graph_break_failure(fail_type: str, reason: str) -> bool:
    """A frame's compile failed on a graph break it could not resume from: fatal under `fullgraph=True`,
    otherwise Dynamo skips the frame (it runs eagerly) and the program goes on. The trace does not say
    which; only how the process ended does (`process_meta.failures`)."""
    return fail_type in GRAPH_BREAK_EXCEPTIONS and "Explanation:" in reason


def _on_compile_failure(fold: _Fold, cid: CompileId, m: dict[str, Any], fail_type: str, reason: str,
                        function: str, origin: FailureOrigin = "compile") -> None:
    file, line = m.get("fail_user_frame_filename"), m.get("fail_user_frame_lineno")
    where = SourceLoc(file, int(line), function) if file and line else None
    if is_graph_break_failure(fail_type, reason):
        _add_break(fold, reason, cid, fatal=True, where=where)
    fold.facts.compile_failures.append(Failure(
        category=Category.UNCLASSIFIED, exception=fail_type, message=compile_failure_line(fail_type, reason), file=file,
        line=int(line) if line else None, origin=origin, compile_id=_frame_key(cid),
        user_frames=(where,) if where else (), traceback=reason,
    ))


def _on_dynamo_error(fold: _Fold, event: ev.DynamoError) -> None:
    return None


# a functional collective in a Dynamo graph's code (`torch.ops._c10d_functional.all_reduce.default(...)`)
_COLLECTIVE = re.compile(r"_c10d_functional\.(\w+)")
_NOT_COLLECTIVES = {"wait_tensor"}
# the graph's inputs as its printed `forward` declares them: `L_x_: "f32[8][1]cpu"`, `L_s0_: "Sym(s0)"`
_FORWARD = re.compile(r"^\s*def forward\(self,?(.*)\):\s*$")
_INPUT = re.compile(r'(\w+)\s*:\s*"([^"]*)"')


def _on_artifact(fold: _Fold, event: ev.Artifact) -> None:
    if event.kind == "dynamo_output_graph" and event.payload is not None and event.compile_id is not None:
        lines = [line for line in event.payload.read().splitlines() if not line.lstrip().startswith("#")]
        key = (event.rank, _frame_key(event.compile_id))
        names = [n for line in lines for n in _COLLECTIVE.findall(line) if n not in _NOT_COLLECTIVES]
        if names:
            fold.collectives[key] = tuple(names)
        forward = next((m[1] for m in map(_FORWARD.match, lines) if m), None)
        if forward is not None:
            fold.inputs[key] = tuple(f"{name}: {meta}" for name, meta in _INPUT.findall(forward))
    if event.kind == "inductor_output_code" and event.payload is not None and event.compile_id is not None:
        fold.output_code.setdefault((event.rank, _frame_key(event.compile_id)), []).append(event.payload)
    if event.kind in _INDUCTOR_ARTIFACTS and event.payload is not None:
        _INDUCTOR_ARTIFACTS[event.kind](fold, event, _json(event.payload.read()))
    if event.kind == "torch_version" and event.payload is not None and fold.facts.torch_version is None:
        fold.facts.torch_version = _torch_version(event.payload.read())
    if fold.keep_artifacts and event.kind != "chromium_event":
        fold.facts.artifacts.append(event)


def _json(text: str) -> Any:
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return None


# a collective kernel called in Inductor's output code (`torch.ops._c10d_functional.all_reduce_.default(buf0, ...)`)
_CODE_COLLECTIVE = re.compile(r"_c10d_functional\.(\w+)\.default\(")
# Inductor's name of a collective kernel: `torch.ops._c10d_functional.all_reduce_.default` -> `all_reduce_`
_KERNEL = re.compile(r"(?:torch\.ops\.)?_c10d_functional\.(\w+?)(?:\.default)?$")


def _kernel(name: object) -> str:
    match = _KERNEL.match(str(name))
    return match[1] if match else str(name)


def _on_schedule(fold: _Fold, event: ev.Artifact, value: Any) -> None:
    """`inductor_collective_schedule`: the collective kernels of one graph, in the scheduler's order, waits
    included (where a wait lands is what a reordering pass changes)."""
    if event.compile_id is None or not isinstance(value, list):
        return
    key = (event.rank, _frame_key(event.compile_id))
    fold.schedules[key] = fold.schedules.get(key, ()) + tuple(map(_kernel, value))


def _on_runtimes(fold: _Fold, event: ev.Artifact, value: Any) -> None:
    """`inductor_runtime_and_tensor_meta`: per scheduled op, its kind, its estimated runtime and its outputs'
    metadata (a graph's forward and backward add up)."""
    if event.compile_id is None or not isinstance(value, dict):
        return
    key = (event.rank, _frame_key(event.compile_id))
    described = tuple(f"{_kernel(op.get('name'))}: "
                      f"{', '.join(filter(None, map(_tensor, op.get('outputs') or ()))) or '-'}"
                      for op in value.get("ops") or () if isinstance(op, dict) and op.get("type") == "collective")
    fold.outputs[key] = fold.outputs.get(key, ()) + described
    ops = [op for op in value.get("ops") or () if isinstance(op, dict)]
    fold.runtimes[key] = fold.runtimes.get(key, 0.0) + sum(float(op.get("estimated_runtime_ns") or 0) for op in ops)


def _tensor(meta: Any) -> str | None:
    """`f32[8, 4]`; None for an output torch logged nothing of (an in-place collective's mutation)."""
    if not isinstance(meta, dict) or meta.get("dtype") is None:
        return None
    dtype = _DTYPES.get(str(meta.get("dtype")), str(meta.get("dtype")))
    return f"{dtype}[{', '.join(map(str, meta.get('shape') or ()))}]"


_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int64": "i64", "int32": "i32",
           "int8": "i8", "uint8": "u8", "bool": "b8"}


def _on_execution(fold: _Fold, event: ev.Artifact, value: Any) -> None:
    """`graph_execution`: the compile ids of the graphs in the order they ran, in the reset generation torch
    logged them in (it logs them when its recording context ends: one that spans a reset is not told apart)."""
    order = value.get("graph_execution_order") if isinstance(value, dict) else None
    ids = []
    for entry in order or ():
        try:
            ids.append(_frame_key(CompileId.parse(str(entry.get("compile_id"))).in_generation(event.generation)))
        except (ValueError, AttributeError):
            continue
    fold.facts.graph_execution += tuple(ids)


_INDUCTOR_ARTIFACTS: dict[str, Callable[[_Fold, ev.Artifact, Any], None]] = {
    "inductor_collective_schedule": _on_schedule,
    "inductor_runtime_and_tensor_meta": _on_runtimes,
    "graph_execution": _on_execution,
}


def _torch_version(text: str) -> str | None:
    value = _json(text)
    if value is None:  # not JSON: the version as written
        return text.strip().strip('"') or None
    return str(value.get("pytorch_version")) if isinstance(value, dict) else str(value)


_DISPATCH: dict[type[ev.Event], Callable[[_Fold, Any], None]] = {
    ev.DynamoStart: _on_start,
    ev.CompilationMetrics: _on_metrics,
    ev.GraphBreakReason: _on_break,
    ev.RecompileReasons: _on_reasons,
    ev.DynamoError: _on_dynamo_error,
    ev.Artifact: _on_artifact,
}

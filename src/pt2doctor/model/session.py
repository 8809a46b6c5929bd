"""The session: everything pt2doctor learned about one run, as frozen, serializable values.

Contract: this package imports nothing of torch and nothing else of pt2doctor's; every later stage
(analysis, reduce, report) takes a `Session` and never re-runs the program to re-render it
(pyinstrument's session.py). The JSON form is documented in docs/reference/session-json.md;
`SCHEMA` names its version and changes when a field changes meaning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal

import msgspec

from pt2doctor.model.accuracy import GraphAccuracy
from pt2doctor.model.export import ExportEvent
from pt2doctor.model.export_draft import DraftReport, ExportCheck
from pt2doctor.model.ids import CompileId, SourceLoc
from pt2doctor.model.minify import MinifyResult

SCHEMA = "pt2doctor.session/2"  # 2: guard failures carry facts only (no `text`); kinds `attribute`, `global_state`


class Category(str, Enum):
    """What kind of failure a run ended in; one per failure (docs/reference/categories-and-stages.md lists them)."""

    GRAPH_BREAK = "graph_break"
    BACKEND_FAILURE = "backend_failure"
    RECOMPILATION = "recompilation"
    ACCURACY = "accuracy"
    DYNAMO_INTERNAL = "dynamo_internal"
    RUNTIME_CRASH = "runtime_crash"
    KERNEL_FAILURE = "kernel_failure"
    USER_ERROR = "user_error"
    TIMEOUT = "timeout"
    UNCLASSIFIED = "unclassified"


class GuardKind(str, Enum):
    """Which property of a guarded value changed between calls."""

    SIZE = "size"
    DTYPE = "dtype"
    STRIDE = "stride"
    RANK = "rank"
    REQUIRES_GRAD = "requires_grad"
    DEVICE = "device"
    VALUE = "value"
    GLOBAL = "global"
    TYPE = "type"
    IDENTITY = "identity"
    ATTRIBUTE = "attribute"  # an attribute was set on or deleted from an object (its `__dict__` changed)
    DISPATCH_KEYS = "dispatch_keys"
    SYMBOLIC = "symbolic"
    GLOBAL_STATE = "global_state"  # grad mode, autocast, deterministic algorithms: `subject` lists the flags
    OTHER = "other"


# "backward_compile": a backward graph's compile that failed at `backward()` (AOTAutograd compiles it lazily)
FailureOrigin = Literal["exception", "graph", "signal", "timeout", "compile", "backward_compile", "interrupt"]
CompileStatus = Literal["ok", "failed", "empty"]


@dataclass(frozen=True, slots=True)
class ExitInfo:
    code: int | None
    signal: int | None = None
    timed_out: bool = False
    interrupted: bool = False

    @property
    def ok(self) -> bool:
        return self.code == 0 and not self.timed_out and self.signal is None


@dataclass(frozen=True, slots=True)
class Phases:
    """Exclusive seconds per compiler phase of one frame compile (they add up to the total), named by what
    torch measured: `dynamo` traces; `aot` is AOTAutograd before Inductor; `inductor` and `codegen` are
    Inductor's; `backend` is the time of a backend that is not Inductor (a custom one, `eager`,
    `aot_eager`: torch does not split it); `cache_load` is a backend call answered from the AOTAutograd
    or FX graph cache."""

    dynamo: float = 0.0
    aot: float = 0.0
    inductor: float = 0.0
    codegen: float = 0.0
    backend: float = 0.0
    cache_load: float = 0.0

    def plus(self, other: Phases) -> Phases:
        return Phases(*(getattr(self, p) + getattr(other, p) for p in PHASE_NAMES))


PHASE_NAMES = ("dynamo", "aot", "inductor", "codegen", "backend", "cache_load")
PHASE_LABELS = {"dynamo": "Dynamo", "aot": "AOTAutograd", "inductor": "Inductor", "codegen": "codegen",
                "backend": "backend", "cache_load": "cache load"}


@dataclass(frozen=True, slots=True)
class Compile:
    """One compile of one frame (a `compilation_metrics` event)."""

    compile_id: CompileId
    function: str
    file: str
    line: int
    ops: int | None
    time_s: float | None
    status: CompileStatus
    phases: Phases = Phases()
    start_s: float | None = None
    graph_breaks: int = 0
    fail_type: str | None = None
    fail_reason: str | None = None
    cache_hits: int = 0
    cache_misses: int = 0
    calls: int | None = None  # how often the compiled graph ran (None: not counted, e.g. a loaded trace)
    collectives: tuple[str, ...] = ()  # the distributed collectives the graph issues, in order (`all_reduce`)
    inputs: tuple[str, ...] = ()  # the graph's inputs as Dynamo printed them (`L_x_: f32[8][1]cpu`), in order
    # Inductor's collective kernels in the order its scheduler placed them (`all_reduce_`; torch's
    # `inductor_collective_schedule` artifact), forward then backward
    collective_schedule: tuple[str, ...] = ()
    # each of those with the metadata of what it outputs (`all_reduce_: f32[8]`), where torch logged Inductor's
    # runtime estimates (`inductor_runtime_and_tensor_meta`, with `torch._inductor.config.log_tlparse`)
    collective_outputs: tuple[str, ...] = ()
    estimated_runtime_ns: float | None = None  # the sum of those runtime estimates over the graph's ops
    code_collectives: tuple[str, ...] = ()  # the collective kernels its output code calls, in order (waits included)


@dataclass(frozen=True, slots=True)
class GraphBreak:
    """A graph break, deduplicated by (break type, user file:line) across every compile."""

    reason: str
    file: str
    line: int
    function: str
    count: int
    hints: tuple[str, ...] = ()
    break_type: str = ""
    explanation: str = ""
    code: str = ""
    gb_id: str | None = None
    gb_url: str | None = None  # PyTorch's page for this kind of break, as torch's message links it
    compile_ids: tuple[CompileId, ...] = ()
    user_stack: tuple[SourceLoc, ...] = ()
    fatal: bool = False


GuardOrigin = Literal["input", "parameter", "buffer", "carried", "global", "state"]


@dataclass(frozen=True, slots=True)
class GuardFailure:
    """One failed guard: what torch said verbatim (`raw`, the evidence) and the facts taken from it; the
    sentence a reader sees is analysis's (`analysis.guard_words`). `subject` is the guarded value in the
    user's names (`x`, `self.fc.weight`), `dim` the tensor dimension, `expected`/`actual` the values torch
    states (dtypes as `float32`; `>= 2` for a size bound), `condition` the guard's test in the user's
    names where torch states one as an expression (`n == 2`), `torch_source` the value as torch names it
    (`L['x']`, for `dynamic_sources`), `hint` torch's own advice on it, `value_type` the Python type of
    the expected value (`int`, `float`, `bool`, `None`, `str`, `value`), `origin` where the value lives
    (`carried`: on Dynamo's stack across a graph break; `state`: torch's global state, grad mode or
    autocast)."""

    kind: GuardKind
    subject: str
    raw: str
    dim: int | None = None
    expected: str | None = None
    actual: str | None = None
    failed_entry: CompileId | None = None
    source: SourceLoc | None = None
    torch_source: str | None = None
    hint: str | None = None
    value_type: str | None = None
    origin: GuardOrigin = "input"
    condition: str | None = None


@dataclass(frozen=True, slots=True)
class Recompile:
    """A compile of a frame that already had cache entries, and why they did not match."""

    function: str
    file: str
    line: int
    compile_id: CompileId
    reason: str
    guard_failures: tuple[GuardFailure, ...] = ()


@dataclass(frozen=True, slots=True)
class LimitHit:
    """A frame that hit `recompile_limit` (or the accumulated limit) and fell back to eager, or, with
    `fail_on_recompile_limit_hit`, raised (`fatal`); `guard_failures`: why it wanted to recompile."""

    function: str
    file: str
    line: int
    compile_id: CompileId
    limit: str
    message: str
    fatal: bool = False
    guard_failures: tuple[GuardFailure, ...] = ()


@dataclass(frozen=True, slots=True)
class Failure:
    """Something that went wrong: a raised exception, a signal, a timeout, or a failed compile."""

    category: Category
    exception: str
    message: str
    file: str | None = None
    line: int | None = None
    origin: FailureOrigin = "exception"
    compile_id: CompileId | None = None
    user_frames: tuple[SourceLoc, ...] = ()
    chain: tuple[str, ...] = ()
    traceback: str = ""


@dataclass(frozen=True, slots=True)
class TraceStats:
    files: tuple[str, ...] = ()
    lines: int = 0
    events: int = 0
    unreadable: int = 0
    unknown: int = 0
    ranks: tuple[int, ...] = ()
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class Environment:
    torch: str | None = None
    python: str | None = None
    platform: str | None = None
    cuda: str | None = None
    gpu: str | None = None
    compiler: str | None = None
    config_diff: dict[str, str] = field(default_factory=dict)
    gpu_peak_bytes: int | None = None  # the most GPU memory the process held (None: no GPU used, or not known)
    gpu_total_bytes: int | None = None


SessionSource = Literal["trace", "watch"]


class Extras(msgspec.Struct, frozen=True, omit_defaults=True):
    """What a session says beyond the run's facts (session.json's `extras`; a field left empty is
    left out): `source` where it came from when not a script run (`trace`: a TORCH_TRACE read on its
    own, `watch`: `pt2doctor.watch()`), `torch_imported` whether the script imported torch,
    `minify` what `pt2doctor minify RUN_DIR` found; `diagnosis` and `advisor` are sections a
    renderer was handed to draw (by shape, `report.html_data`); `forked` the script's process was forked from an
    interpreter that had imported torch (`processes.fresh_forks`), not started anew."""

    source: SessionSource | None = None
    torch_imported: bool | None = None
    forked: bool = False
    minify: MinifyResult | None = None
    diagnosis: dict[str, Any] | None = None
    advisor: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Session:
    schema: str
    torch_version: str | None
    command: tuple[str, ...]
    exit: ExitInfo
    compiles: tuple[Compile, ...] = ()
    graph_breaks: tuple[GraphBreak, ...] = ()
    recompiles: tuple[Recompile, ...] = ()
    failures: tuple[Failure, ...] = ()
    limit_hits: tuple[LimitHit, ...] = ()
    cwd: str = ""
    started_at: float | None = None
    wall_s: float | None = None
    trace: TraceStats = TraceStats()
    environment: Environment = Environment()
    stderr_tail: str = ""
    run_dir: str | None = None
    extras: Extras = field(default_factory=Extras)
    accuracy: tuple[GraphAccuracy, ...] = ()  # one per compiled graph, from `pt2doctor accuracy` only
    export_steps: tuple[ExportEvent, ...] = ()  # the torch.export / AOTInductor steps it went through
    export_drafts: tuple[DraftReport, ...] = ()  # draft_export's report of each export call (`explain`)
    export_checks: tuple[ExportCheck, ...] = ()  # exported programs it ran, judged against their source
    # the compiled graphs in the order they ran, where torch recorded it (the `graph_execution` artifact)
    graph_execution: tuple[CompileId, ...] = ()

    @property
    def compile_time_s(self) -> float:
        return sum(c.time_s or 0.0 for c in self.compiles)

    @property
    def frames(self) -> int:
        return len({c.compile_id.frame_key for c in self.compiles})

    @property
    def graphs(self) -> int:
        return sum(1 for c in self.compiles if c.status == "ok" and (c.ops or 0) > 0)

    @property
    def ops(self) -> int:
        return sum(c.ops or 0 for c in self.compiles if c.status == "ok")

    @property
    def graph_break_count(self) -> int:
        return sum(b.count for b in self.graph_breaks)

"""The child's side of a run, turned into facts: paths in a run dir, the sidecar, crash stacks.

Contract: reads what `capture.child` (its `ChildReport`, `model.child`) and faulthandler wrote and
never raises for a missing or unreadable file (a crashed child leaves no report). Failures come out unclassified;
analysis decides their category.
"""

from __future__ import annotations

import linecache
import os
import platform
import re
import shutil
import signal
import sys
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from pt2doctor.capture.child.torch_env import cxx_version
from pt2doctor.capture.trace.session_builder import is_graph_break_failure
from pt2doctor.model import Category, Compile, CompileId, Environment, ExitInfo, Failure, GraphBreak, SourceLoc
from pt2doctor.model.child import MAIN_THREAD_MARK, ChildReport, ExceptionRecord
from pt2doctor.model.export import EVENTS_FILE
from pt2doctor.model.export_draft import CHECKS_FILE, DRAFT_FILE
from pt2doctor.model.serialize import RecordError, read_lines, read_record
from pt2doctor.processes.launch import COMPILE_CACHE_VARS

T = TypeVar("T")

_FAULT_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<fn>\S+)')
_NOT_USER = tuple(
    str(Path(p).resolve())
    for p in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
              str(Path(__file__).resolve().parents[1])}
)

_EXAMPLES = str(Path(__file__).resolve().parents[1] / "examples")  # the demo's scripts are user code


@dataclass(frozen=True, slots=True)
class RunPaths:
    root: Path

    @property
    def trace_dir(self) -> Path:
        return self.root / "trace"

    @property
    def meta(self) -> Path:
        return self.root / "child.json"

    @property
    def spec(self) -> Path:
        return self.root / "child-spec.json"

    @property
    def faulthandler(self) -> Path:
        return self.root / "crash-stack.txt"

    @property
    def graphs_dir(self) -> Path:
        return self.root / "graphs"

    @property
    def session(self) -> Path:
        return self.root / "session.json"

    def of_rank(self, rank: int) -> RunPaths:
        """Where rank `rank` of a job run here keeps its sidecar and crash stack (its trace is in `trace_dir`)."""
        return RunPaths(self.root / f"rank-{rank}")

    @property
    def export_log(self) -> Path:
        return self.root / EVENTS_FILE

    @property
    def draft_log(self) -> Path:
        return self.root / DRAFT_FILE

    @property
    def export_checks(self) -> Path:
        return self.root / CHECKS_FILE

    def clear(self) -> None:
        """Remove the outputs of an earlier run in the same directory, so no stale fact survives."""
        for path in (self.meta, self.faulthandler, self.session, self.export_log, self.draft_log, self.export_checks):
            path.unlink(missing_ok=True)
        if self.trace_dir.exists():
            for file in self.trace_dir.glob("*.log"):
                file.unlink()
        shutil.rmtree(self.graphs_dir, ignore_errors=True)  # the recorder appends to its index
        for rank in self.root.glob("rank-*"):  # a job's per-rank sidecars, stacks and collective records
            shutil.rmtree(rank, ignore_errors=True)


def is_user_file(path: str) -> bool:
    if not path or path.startswith("<") or "/torchinductor_" in path or "/.triton/" in path or _in_cache_dir(path):
        return False  # generated kernels and wrappers are the compiler's, not the user's
    try:
        resolved = str(Path(path).resolve())
    except OSError:
        return False
    return resolved.startswith(_EXAMPLES) or not resolved.startswith(_NOT_USER)


def _in_cache_dir(path: str) -> bool:
    """Under a compile cache the user moved (`TORCHINDUCTOR_CACHE_DIR`, `TRITON_CACHE_DIR`): generated code."""
    dirs = [os.environ.get(name) for name in COMPILE_CACHE_VARS]
    return any(d and os.path.abspath(path).startswith(os.path.abspath(d) + os.sep) for d in dirs)


def records(path: Path, kind: type[T]) -> list[T]:
    """The JSON-lines records the child appended to `path`; none when a line is torn (it died writing)."""
    try:
        return read_lines(path, kind)
    except RecordError:
        return []


def read_meta(paths: RunPaths) -> ChildReport | None:
    try:
        return read_record(paths.meta, ChildReport)
    except (OSError, RecordError):
        return None


def failures(meta: ChildReport | None, exit_info: ExitInfo, compile_failures: Iterable[Failure], paths: RunPaths,
             timeout_s: float | None) -> list[Failure]:
    out: list[Failure] = []
    exc = meta.exception if meta is not None else None
    if exit_info.signal and exc is not None and not exit_info.interrupted:
        # the script raised and then the process died of a signal (a kernel that wrote past a buffer's end
        # corrupts the heap, and glibc aborts at a later free, at the latest in the teardown): it ended
        # with the signal, the run's identity (`analysis.failures.signature`); the exception may be a symptom
        name = _signal_name(exit_info.signal)
        out.append(_stack_failure("signal", name, f"the process died with {name} after the script raised", paths))
    if exit_info.interrupted and exc is not None and exc.type.endswith("KeyboardInterrupt"):
        # our Ctrl-C, forwarded: the script did not fail; where it was is in the exception's frames
        interrupt = _from_exception(exc, [])
        out.append(replace(interrupt, exception="KeyboardInterrupt", message="interrupted (Ctrl-C)",
                           origin="interrupt"))
    elif exc is not None:
        out.append(_from_exception(exc, list(compile_failures)))
    elif exit_info.timed_out:
        out.append(_stack_failure("timeout", "Timeout", f"still running after {timeout_s:g} s; stopped", paths))
    elif exit_info.signal:
        name = _signal_name(exit_info.signal)
        out.append(_stack_failure("signal", name, f"the process died with {name}", paths))
    elif exit_info.interrupted:
        out.append(_stack_failure("interrupt", "KeyboardInterrupt", "interrupted (Ctrl-C)", paths))
    matched = {f.compile_id for f in out if f.compile_id is not None}
    recovered = [f for f in compile_failures if f.compile_id not in matched and not _is_same(f, out)]
    # a graph break the process did not die of made Dynamo skip its frame: a break, not a failure
    out.extend(f for f in recovered if not is_graph_break_failure(f.exception, f.traceback))
    return out


def settle_fatal(breaks: Iterable[GraphBreak], failures: Iterable[Failure]) -> list[GraphBreak]:
    """A break is fatal only where a compile it ended is among the run's failures (the process died of
    it, as under `fullgraph=True`); else Dynamo skipped the frame and ran it eagerly."""
    failed = {f.compile_id for f in failures if f.compile_id is not None}
    return [b if not b.fatal or failed.intersection(b.compile_ids) else replace(b, fatal=False) for b in breaks]


def _is_same(failure: Failure, known: list[Failure]) -> bool:
    return any(k.exception.rsplit(".", 1)[-1] == failure.exception and k.file == failure.file for k in known)


def _from_exception(exc: ExceptionRecord, compile_failures: list[Failure]) -> Failure:
    user = tuple(f for f in exc.frames if is_user_file(f.file))
    where = user[-1] if user else None
    short = exc.type.rsplit(".", 1)[-1]
    # a backward graph's compile failure surfaces from `backward()`, tagged by the graph that raised it (below)
    match = next((f for f in compile_failures if f.exception == short and f.origin == "compile"), None)
    if match is not None and match.file:
        # Dynamo knows the line inside the compiled function; the traceback only has the call site.
        where = SourceLoc(match.file, match.line or 0)
    graph = _compile_id(exc.raised_by_graph) if match is None else None
    return Failure(
        category=Category.UNCLASSIFIED, exception=exc.type,
        message=exc.message, file=where.file if where else None, line=where.line if where else None,
        origin="graph" if graph else "exception",
        compile_id=match.compile_id if match else graph, user_frames=user,
        chain=exc.chain, traceback=exc.traceback,
    )


def _compile_id(text: str | None) -> CompileId | None:
    try:
        return CompileId.parse(text) if text else None
    except ValueError:
        return None


def _stack_failure(origin: str, exception: str, message: str, paths: RunPaths) -> Failure:
    frames = crash_frames(paths)
    user = tuple(f for f in frames if is_user_file(f.file))
    where = user[0] if user else None
    return Failure(category=Category.UNCLASSIFIED, exception=exception, message=message,
                   file=where.file if where else None, line=where.line if where else None, origin=origin,  # type: ignore[arg-type]
                   user_frames=user, traceback=script_thread(_read(paths.faulthandler)))


def script_thread(text: str) -> str:
    """The stack that matters in a faulthandler dump of every thread: the crashing thread's (`Current thread`),
    else the script's main thread (a dump at the timeout marks none as current, and a compile worker's thread,
    listed first, would hide where the script waits): by the id the child wrote first, else the last listed
    (faulthandler lists the newest thread first). The other threads stay in crash-stack.txt."""
    blocks = [b for b in text.split("\n\n") if "most recent call first" in b]
    current = next((b for b in blocks if "Current thread" in b), None)
    if current is not None or not blocks:
        return current if current is not None else text
    mark = re.search(re.escape(MAIN_THREAD_MARK) + r"(0x[0-9a-f]+)", text)
    main = next((b for b in blocks if mark and f"Thread {mark[1]} " in b), None)
    return main if main is not None else blocks[-1]


# faulthandler's first line for each fatal signal it handles
_FATAL = {"Aborted": signal.SIGABRT, "Segmentation fault": signal.SIGSEGV, "Bus error": signal.SIGBUS,
          "Floating-point exception": signal.SIGFPE, "Illegal instruction": signal.SIGILL}


def fatal_signal(paths: RunPaths) -> int | None:
    """The signal a process died of, where faulthandler wrote `Fatal Python error: Aborted` (or another)."""
    text = _read(paths.faulthandler)
    return next((int(sig) for name, sig in _FATAL.items() if f"Fatal Python error: {name}" in text), None)


def crash_frames(paths: RunPaths) -> tuple[SourceLoc, ...]:
    """Frames of the script's thread from faulthandler's dump (`script_thread`), innermost first (its own order)."""
    out = []
    for line in script_thread(_read(paths.faulthandler)).splitlines():
        m = _FAULT_FRAME.match(line)
        if m:
            out.append(SourceLoc(m["file"], int(m["line"]), m["fn"],
                                 linecache.getline(m["file"], int(m["line"])).strip()))
    return tuple(out)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def environment(meta: ChildReport | None, torch_version: str | None) -> Environment:
    if meta is None:  # it died before reporting (a signal): what the parent can tell itself
        return Environment(torch=torch_version, python=sys.version.split()[0], platform=platform.platform(),
                           compiler=cxx_version())
    env = meta.environment
    return Environment(
        torch=env.torch or torch_version, python=env.python or sys.version.split()[0], platform=env.platform,
        cuda=env.cuda, gpu=env.gpu, compiler=env.compiler, config_diff=dict(env.config_diff),
        gpu_peak_bytes=env.gpu_peak_bytes, gpu_total_bytes=env.gpu_total_bytes,
    )


def with_code(breaks: Iterable[GraphBreak]) -> list[GraphBreak]:
    """Fill each break's source line from the user's file when the trace did not carry it."""
    return [b if b.code else replace(b, code=linecache.getline(b.file, b.line).strip()) for b in breaks]


def call_order(meta: ChildReport | None) -> tuple[CompileId, ...]:
    """The compiled graphs in the order the child saw them called (`capture.child.call_counter`)."""
    order = []
    for text in meta.call_order if meta is not None else ():
        try:
            order.append(CompileId.parse(text).compile)
        except ValueError:
            continue  # a graph compiled outside any compile id ("?")
    return tuple(order)


def with_calls(compiles: Iterable[Compile], calls: dict[str, int] | None) -> list[Compile]:
    """Attach the child's per-compile-id call counts (`capture.child.call_counter`) to the compiles."""
    if not calls:
        return list(compiles)
    return [replace(c, calls=calls.get(str(c.compile_id), 0)) for c in compiles]

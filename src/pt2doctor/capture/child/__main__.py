"""The child-process bootstrap: run the user's script exactly as `python SCRIPT ARGS` would.

Contract: invoked as `python -m pt2doctor.capture.child --spec SPEC SCRIPT [ARGS...]`, where SPEC
is a `ChildSpec` file (`model.child`) the parent wrote: the hooks to install and where to write the
sidecar (`ChildReport`: exception, exit code, environment). Options travel in that one file, so the
script's argv and environment stay its own. The script runs as `__main__` with its own argv,
`sys.path[0]` and cwd; its stdin/stdout/stderr are untouched. This module then behaves like Python:
an uncaught exception prints its traceback and exits 1, `sys.exit(n)` exits n. A native crash
leaves the sidecar unwritten, but faulthandler's dump names the Python stack.
"""

from __future__ import annotations

import builtins
import faulthandler
import importlib.machinery
import io
import os
import platform
import struct
import sys
import threading
import time
import traceback
import types
from pathlib import Path
from types import TracebackType
from typing import Any

from pt2doctor.capture.child import collective_record
from pt2doctor.model.child import MAIN_THREAD_MARK, ChildEnvironment, ChildReport, ChildSpec, ExceptionRecord
from pt2doctor.model.exit_codes import ExitCode
from pt2doctor.model.ids import SourceLoc
from pt2doctor.model.serialize import read_record, write_record

_MAX_MESSAGE = 20_000


def _exception_record(exc: BaseException) -> ExceptionRecord:
    chain, seen = [], set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        chain.append(f"{_qualname(type(cur))}: {str(cur).strip()[:2000]}")
        inner = getattr(cur, "inner_exception", None)
        cur = cur.__cause__ or inner or (None if cur.__suppress_context__ else cur.__context__)
    tb: TracebackType | None = exc.__traceback__
    frames = [SourceLoc(f.filename, f.lineno or 0, f.name, (f.line or "").strip()) for f in traceback.extract_tb(tb)]
    if isinstance(exc, SyntaxError) and exc.filename:
        frames.append(SourceLoc(exc.filename, exc.lineno or 0, "<module>", (exc.text or "").strip()))
    raised_by = getattr(exc, "_pt2doctor_raised_by_graph", None)  # call_counter.RAISED_BY
    return ExceptionRecord(
        type=_qualname(type(exc)), message=str(exc)[:_MAX_MESSAGE], chain=tuple(chain), frames=tuple(frames),
        traceback="".join(traceback.format_exception(exc))[-_MAX_MESSAGE:],
        raised_by_graph=raised_by if isinstance(raised_by, str) else None,
    )


def _qualname(kind: type) -> str:
    module = kind.__module__
    return kind.__qualname__ if module in ("builtins", "__main__") else f"{module}.{kind.__qualname__}"


def _environment() -> ChildEnvironment:
    python, system = sys.version.split()[0], platform.platform()
    torch = sys.modules.get("torch")
    if torch is None:
        return ChildEnvironment(python=python, platform=system)
    try:
        from pt2doctor.capture.child import torch_env

        facts = torch_env.describe(torch)
    except Exception as exc:  # environment facts are best effort; never mask the script's outcome
        return ChildEnvironment(python=python, platform=system, torch=_text(getattr(torch, "__version__", None)),
                                error=repr(exc))
    return ChildEnvironment(
        python=python, platform=system, torch=_text(facts.get("torch")), cuda=_text(facts.get("cuda")),
        gpu=_text(facts.get("gpu")), compiler=_text(facts.get("compiler")),
        config_diff={str(k): str(v) for k, v in (facts.get("config_diff") or {}).items()},
        gpu_peak_bytes=facts.get("gpu_peak_bytes"), gpu_total_bytes=facts.get("gpu_total_bytes"),
    )


def _text(value: object) -> str | None:
    """A plain str (torch's versions are str subclasses, which the codec does not write)."""
    return None if value is None else str(value)


def _write_meta(path: str, exit_code: int, started: float, exception: ExceptionRecord | None = None) -> None:
    report = ChildReport(
        exit_code=exit_code, wall_s=time.time() - started, ended_at=time.time(), exception=exception,
        calls=_calls.counts() if _calls is not None else None,
        call_order=tuple(_calls.order) if _calls is not None else (), environment=_environment(),
        torch_imported="torch" in sys.modules,
    )
    write_record(Path(path), report)


_calls: Any = None


def _install_hooks(spec: ChildSpec) -> None:
    global _calls
    hooks = spec.hooks
    from pt2doctor.capture import torch_compat
    from pt2doctor.capture.child.call_counter import after_import

    # every hook's compile ids, and the trace's, tell a compile after `torch._dynamo.reset()` from one before
    after_import("torch._dynamo", torch_compat.count_dynamo_resets)
    if hooks.autotune_anew:  # once Inductor's config is imported (never imported for it), before the script sets it
        after_import("torch._inductor.config", torch_compat.autotune_anew_as_own)
    if hooks.accuracy_probe is not None:  # before the counter, whose wrapper must count only the program's calls
        from pt2doctor.capture.child import accuracy_probe

        accuracy_probe.install(hooks.accuracy_probe)
    if spec.count_calls:  # a traced run: count how often each compiled graph runs
        from pt2doctor.capture.child import call_counter

        _calls = call_counter.install()
    if spec.record_dir:
        from pt2doctor.capture.child import graph_recorder

        graph_recorder.install(Path(spec.record_dir), accuracy_tolerance=hooks.record_accuracy_tolerance,
                               every_aot_graph=hooks.record_every_aot_graph,
                               keep_aot_cache=hooks.record_keeps_aot_cache, run_eagerly=hooks.record_run_eagerly)
    if hooks.kernel_check is not None:  # after the recorder: it names each kernel's graph by the recorder's id
        from pt2doctor.capture.child import kernel_check

        kernel_check.install(hooks.kernel_check)
    if hooks.frame_record_dir:
        from pt2doctor.capture.child import frame_recorder

        frame_recorder.install(Path(hooks.frame_record_dir))
    if spec.export_log or spec.draft_log or spec.checks_log or (hooks.overrides and hooks.overrides.changes_export):
        from pt2doctor.export.capture import observer as export_observer

        export_observer.install(spec.export_log, hooks.overrides, record_dir=spec.record_dir,
                                draft_log=spec.draft_log, checks_log=spec.checks_log)
    if hooks.overrides is not None:
        from pt2doctor.capture.child import overrides

        overrides.install(hooks.overrides)


def _crash_log(spec: ChildSpec) -> None:
    if not spec.crash_log:
        return
    stream = open(spec.crash_log, "w")  # noqa: SIM115 - must stay open until the process ends
    faulthandler.enable(file=stream, all_threads=True)
    # which of the threads in a dump is the script's (faulthandler marks none as current in a timed dump)
    stream.write(f"{MAIN_THREAD_MARK}0x{threading.main_thread().ident or 0:0{2 * struct.calcsize('L')}x}\n")
    stream.flush()
    left = _time_left(spec)
    if left is not None:  # dump where the script is just before the parent stops it, so a hang names its line
        faulthandler.dump_traceback_later(max(left - 1.0, 0.5), exit=False, file=stream)


def main() -> None:
    if len(sys.argv) < 4 or sys.argv[1] != "--spec":
        sys.stderr.write("usage: python -m pt2doctor.capture.child --spec SPEC SCRIPT [ARGS...]\n")
        sys.exit(ExitCode.USAGE)
    spec = _for_this_process(read_record(Path(sys.argv[2]), ChildSpec))
    script = os.path.abspath(sys.argv[3])
    _crash_log(spec)
    if spec.line_buffered_stdout:
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    sys.argv = sys.argv[3:]  # argv[0] as the user typed it, as `python SCRIPT` leaves it
    sys.path[0] = os.path.dirname(script)
    started = time.time()
    _install_hooks(spec)
    if _is_rank(spec):
        _observe_rank(spec)
    meta = spec.meta
    try:
        _run_as_main(script)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        collective_record.write("at exit")
        if meta:
            _write_meta(meta, code, started)
        raise
    except BaseException as exc:
        _from_script(exc, script)
        collective_record.write("after the script raised")
        if meta:
            _write_meta(meta, 1, started, _exception_record(exc))
        if isinstance(exc, KeyboardInterrupt):
            raise  # Python's own handling: the exit status of an interrupt
        sys.excepthook(type(exc), exc, exc.__traceback__)  # what Python prints, from the script's first frame
        sys.exit(1)  # as `python SCRIPT` exits on an uncaught exception: the script's status, not ours
    collective_record.write("at exit")
    if meta:
        _write_meta(meta, 0, started)


def _is_rank(spec: ChildSpec) -> bool:
    return spec.per_rank and spec.meta is not None and "RANK" in os.environ


def _observe_rank(spec: ChildSpec) -> None:
    """What tlparse compares across ranks and torch logs only when asked: Inductor's runtime estimates and
    output metadata per op (the order the compiled graphs run in is the call counter's, for every run); and
    the collectives the rank issues (torch's Flight Recorder), written just before the timeout too.
    Recording only: the program computes the same."""
    from pt2doctor.capture import torch_compat

    name, value = torch_compat.RUNTIME_ESTIMATES_ENV
    os.environ.setdefault(name, value)
    left = _time_left(spec)
    # before faulthandler's dump (1 s before the stop): the record is written from a thread, and may take longer
    collective_record.install(Path(spec.meta or ".").parent, max(left - 2.0, 0.5) if left is not None else None)


def _time_left(spec: ChildSpec) -> float | None:
    """Seconds until the parent stops this process at its timeout. The parent's clock started at launch: a
    launcher in between (torchrun) starts this process seconds later."""
    if not spec.timeout_s or spec.timeout_s <= 2:
        return None
    return spec.timeout_s - (time.time() - spec.launched_at if spec.launched_at else 0.0)


def _for_this_process(spec: ChildSpec) -> ChildSpec:
    """A rank of a job (torchrun sets RANK) writes its sidecar, crash log and recordings (graphs, the
    failing frame) under its own `rank-N/`, so ranks never write one file and each rank's graphs can be
    minified on their own."""
    if not _is_rank(spec) or spec.meta is None:
        return spec
    import msgspec

    from pt2doctor.capture.process_meta import RunPaths

    ranked = RunPaths(Path(spec.meta).parent).of_rank(int(os.environ["RANK"]))
    ranked.root.mkdir(parents=True, exist_ok=True)
    hooks = spec.hooks
    if hooks.frame_record_dir:
        hooks = msgspec.structs.replace(hooks, frame_record_dir=str(ranked.root / Path(hooks.frame_record_dir).name))
    return msgspec.structs.replace(spec, meta=str(ranked.meta),
                                   crash_log=str(ranked.faulthandler) if spec.crash_log else None,
                                   export_log=str(ranked.export_log) if spec.export_log else None,
                                   draft_log=str(ranked.draft_log) if spec.draft_log else None,
                                   checks_log=str(ranked.export_checks) if spec.checks_log else None,
                                   record_dir=str(ranked.root) if spec.record_dir else None, hooks=hooks)


def _run_as_main(script: str) -> None:
    """Run `script` as `python SCRIPT` runs it: a fresh `__main__` module whose `__file__` is the absolute
    path (Python >= 3.9), compiled from the file's bytes, argv left as given (`runpy.run_path` would
    make argv[0] absolute and put its own frames above the script's)."""
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=script, __builtins__=builtins, __cached__=None, __spec__=None,
                         __loader__=importlib.machinery.SourceFileLoader("__main__", script))
    sys.modules["__main__"] = main
    with io.open_code(script) as handle:
        code = compile(handle.read(), script, "exec")
    exec(code, main.__dict__)


def _from_script(exc: BaseException, script: str) -> None:
    """Drop the frames above the script's own (this bootstrap's), as Python's traceback starts there."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != script:
        tb = tb.tb_next
    exc.__traceback__ = tb


if __name__ == "__main__":
    main()

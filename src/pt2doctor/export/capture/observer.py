"""Observe the script's torch.export and AOTInductor steps in the child; optionally change how they run.

Contract: `install(log, overrides, record_dir, draft_log, checks_log)` is called once before the script runs,
by `capture/child/__main__.py` (and by a program reducer's candidate, `reduce.program_harness`, with no log). Each seam
of `torch_compat.export.SEAMS` is wrapped when its module is first imported (`export_imports.when_imported`): a call
appends `ExportEvent(STARTED)` to `log` (JSON lines, flushed before the step runs, so a step that kills the process is
the one left started), then `PASSED`, or `FAILED` with the exception, which is re-raised unchanged. Only the outermost
step is recorded (AOTInductor decomposes the program itself: that is part of its step). Observing never
changes the program: the wrapped functions get the arguments the script passed and their results go
back to it as they are. A recorded run (`record_dir`) also keeps what a repro of an AOTInductor failure needs
(`export_record.ExportRecorder`), before the step runs. An `explain` run (`draft_log`) also runs
`torch.export.draft_export` after each tracing step, on copies (`export_draft.DraftRecorder`); with
`checks_log`, the programs the script derives and runs are judged against their source
(`export_checks.ExportChecker`). What-if options (the `Overrides` of `diagnose`'s runs and of the program
reducer's candidates) do change it:
- `export_eager`: AOTInductor off: `aoti_compile_and_package` keeps the exported program instead of
  compiling it and `aoti_load_package` returns it, run eagerly (`torch_compat.export.EagerPackages`);
  the steps are still recorded, so the run shows how far the script got;
- `export_strict`: every `torch.export.export` call traces strictly (True) or not (False);
- `export_runs_module`: every `torch.export.export` call first calls its module with its inputs, eagerly,
  on deep copies (the originals when they cannot be copied) and with the RNG state restored after; when
  that raises, the call raises `ModuleFailsEagerly` instead of exporting: the program is wrong, not export.
  A reduced program must keep a module that runs (`reduce.program`);
- `decompositions_off`: `ExportedProgram.run_decompositions` returns the program it was given, unchanged;
- `export_off`: export turned off: `torch.export.export` returns a stand-in whose `module()` is the module
  it was given, run eagerly (`torch_compat.export.EagerProgram`), AOTInductor off with it (as `export_eager`).
"""

from __future__ import annotations

import copy
import functools
import itertools
import os
import threading
from collections.abc import Callable
from typing import IO, Any

from pt2doctor.capture.torch_compat import export as compat
from pt2doctor.export.capture.checks import ExportChecker
from pt2doctor.export.capture.draft import DraftRecorder
from pt2doctor.export.capture.imports import when_imported
from pt2doctor.export.capture.record import ExportRecorder
from pt2doctor.model.child import Overrides
from pt2doctor.model.export import TRACE_STEPS, ExportEvent, ExportStep, Phase
from pt2doctor.model.minify import DEFAULT_TOLERANCE
from pt2doctor.model.serialize import append_line

_MAX_MESSAGE = 20_000


class _Observer:
    def __init__(self, log: str | None, recorder: ExportRecorder | None, drafts: DraftRecorder | None = None,
                 checker: ExportChecker | None = None) -> None:
        self._path = log
        self._log: IO[str] | None = None  # opened at the first step: a run that never exports writes no file
        self._recorder = recorder
        self._drafts = drafts
        self._checker = checker
        self._counter = itertools.count()
        self._depth = threading.local()
        self._lock = threading.Lock()

    def wrap(self,
             step_of: Callable[[dict[str, Any]], ExportStep]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(fn)
            def observed(*args: Any, **kwargs: Any) -> Any:
                depth = getattr(self._depth, "value", 0)
                if depth:
                    return fn(*args, **kwargs)
                step, index = step_of(kwargs), next(self._counter)
                if self._recorder is not None:
                    self._recorder.before(step, args, kwargs)
                module = _module_of(step, args, kwargs)
                self._write(ExportEvent(index, step, Phase.STARTED, module=module))
                self._depth.value = 1
                reference = self._checker.before(step, args, kwargs) if self._checker is not None else None
                try:
                    out = fn(*args, **kwargs)
                except BaseException as exc:
                    self._write(ExportEvent(index, step, Phase.FAILED, _qualname(type(exc)), str(exc)[:_MAX_MESSAGE],
                                            module))
                    self._draft(step, index, fn, args, kwargs)
                    raise
                finally:
                    self._depth.value = 0
                self._write(ExportEvent(index, step, Phase.PASSED))
                self._draft(step, index, fn, args, kwargs)
                if self._checker is not None:
                    self._depth.value = 1  # the checks' runs are not the script's steps
                    try:
                        self._checker.after(step, index, args, kwargs, out, reference)
                    finally:
                        self._depth.value = 0
                return out

            return observed

        return wrap

    def _draft(self, step: ExportStep, index: int, fn: Callable[..., Any], args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> None:
        if self._drafts is None or step not in TRACE_STEPS:
            return
        self._depth.value = 1  # draft_export's own steps are part of this one
        try:
            self._drafts.draft(index, fn, args, kwargs)
        finally:
            self._depth.value = 0

    def _write(self, event: ExportEvent) -> None:
        if self._path is None:
            return
        with self._lock:
            if self._log is None:
                self._log = open(self._path, "a")  # noqa: SIM115 - appended to until the process ends
            append_line(self._log, event)
            self._log.flush()


def _qualname(kind: type) -> str:
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def _module_of(step: ExportStep, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The qualified class of the module a tracing step exports (whose signature its spec must follow)."""
    if step not in TRACE_STEPS:
        return ""
    module = args[0] if args else kwargs.get("mod")
    return _qualname(type(module)) if module is not None else ""


def _trace_step(kwargs: dict[str, Any]) -> ExportStep:
    return ExportStep.STRICT_TRACE if compat.is_strict(kwargs) else ExportStep.NON_STRICT_TRACE


def _forcing_strict(strict: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def wrap(export: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(export)
        def forced(*args: Any, **kwargs: Any) -> Any:
            return export(*args, **{**kwargs, "strict": strict})

        return forced

    return wrap


class ModuleFailsEagerly(Exception):
    """The module a `torch.export.export` call was given raises when called with its inputs, eagerly."""


def _running_module_first(export: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(export)
    def checked(*args: Any, **kwargs: Any) -> Any:
        import torch

        call = compat.export_arguments(export, args, kwargs)
        try:
            module, inputs, named = copy.deepcopy((call["mod"], call.get("args", ()), call.get("kwargs") or {}))
        except Exception:
            module, inputs, named = call["mod"], call.get("args", ()), call.get("kwargs") or {}
        with torch.random.fork_rng(devices=range(torch.cuda.device_count()) if torch.cuda.is_initialized() else []):
            try:
                module(*inputs, **named)
            except Exception as exc:
                raise ModuleFailsEagerly(f"the module given to torch.export.export raises when called with its inputs "
                                         f"eagerly: {type(exc).__name__}: {exc}") from exc
        return export(*args, **kwargs)

    return checked


def _standing_in(export: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(export)
    def stand_in(*args: Any, **kwargs: Any) -> Any:
        return compat.EagerProgram(compat.export_arguments(export, args, kwargs)["mod"])

    return stand_in


def _unchanged(_run_decompositions: Callable[..., Any]) -> Callable[..., Any]:
    def unchanged(program: Any, *_args: Any, **_kwargs: Any) -> Any:
        return program

    return unchanged


def _replacing(seam: compat.Seam, packages: compat.EagerPackages) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def wrap(real: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(real)
        def replaced(*args: Any, **kwargs: Any) -> Any:
            if seam.step is ExportStep.AOTI_COMPILE:
                return packages.compile(*args, **kwargs)
            return packages.load(real, *args, **kwargs)

        return replaced

    return wrap


def _install_seam(seam: compat.Seam, observer: _Observer, over: Overrides) -> None:
    # what-if replacements go in first, inside the observer: it records the step as it then runs
    if seam.step is None and over.export_off:
        compat.replace_seam(seam, _standing_in)
    if seam.step is None and over.export_runs_module:
        compat.replace_seam(seam, _running_module_first)
    if seam.step is None and over.export_strict is not None:
        compat.replace_seam(seam, _forcing_strict(over.export_strict))
    if seam.step is ExportStep.RUN_DECOMPOSITIONS and over.decompositions_off:
        compat.replace_seam(seam, _unchanged)
    if (over.export_eager or over.export_off) and seam.step in (ExportStep.AOTI_COMPILE, ExportStep.AOTI_LOAD):
        compat.replace_seam(seam, _replacing(seam, _PACKAGES))
    step = seam.step
    if step is None and over.export_strict is not None:  # the mode the call runs in, not the one the script asked for
        step = ExportStep.STRICT_TRACE if over.export_strict else ExportStep.NON_STRICT_TRACE
    compat.replace_seam(seam, observer.wrap(_trace_step if step is None else lambda _kwargs: step))


_PACKAGES = compat.EagerPackages()


def install(log: str | None, overrides: Overrides | None = None, record_dir: str | None = None,
            draft_log: str | None = None, checks_log: str | None = None) -> None:
    over = overrides or Overrides()
    drafts = DraftRecorder(draft_log, os.path.dirname(draft_log)) if draft_log else None
    checker = ExportChecker(checks_log, DEFAULT_TOLERANCE) if checks_log else None
    observer = _Observer(log, ExportRecorder(record_dir) if record_dir else None, drafts, checker)
    if over.export_eager or over.export_off:  # the stand-in package's calls are the package's run step
        run = observer.wrap(lambda _kwargs: ExportStep.AOTI_RUN)
        compat.EagerPackage.__call__ = run(compat.EagerPackage.__call__)  # type: ignore[method-assign]
    for seam in compat.SEAMS:
        when_imported(seam.module, functools.partial(_install_seam, seam, observer, over))

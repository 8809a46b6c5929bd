"""The torch.export and AOTInductor entry points that the diagnose child observes (and, for a what-if run,
replaces), by module and attribute. See the package contract in `torch_compat/__init__.py`.

Checked on torch 2.13.0 (CPU): `torch.export.export(mod, args, kwargs=None, *, strict=False, ...)`,
`torch.export.exported_program.ExportedProgram.run_decompositions`,
`torch._inductor.aoti_compile_and_package(ep, *, package_path=None, inductor_configs=None) -> str`,
`torch._inductor.aoti_load_package(path, ...) -> AOTICompiledModel`, whose class lives in
`torch.export.pt2_archive._package` and is called like the exported module. torch has no hook around
these calls, so they are replaced by wrappers; a wrapper must call through with the same arguments.
`draft_failures` runs `torch.export.draft_export` and reads its report (`ep._report.failures`, each a
`FailureReport` with `failure_type` and a `data` dict; frames name files by a number in
`str_to_filename`), keeping the script's trace handlers, which draft_export's log capture removes
from the `torch.__trace` logger and does not put back (2.13).
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pt2doctor.capture.torch_compat.observe import interned_strings
from pt2doctor.model.export import ExportStep


@dataclass(frozen=True, slots=True)
class Seam:
    """`owner.attribute` of module `module` (owner: a class in it, or the module itself when empty)."""

    module: str
    owner: str
    attribute: str
    step: ExportStep | None  # None: the tracing step, strict or not by the call's arguments


# Which module's import makes each seam available: torch.export comes with torch, the rest with Inductor
# (importing Inductor for nothing would cost a second in every run).
SEAMS: tuple[Seam, ...] = (
    Seam("torch.export", "", "export", None),
    Seam("torch.export.exported_program", "ExportedProgram", "run_decompositions", ExportStep.RUN_DECOMPOSITIONS),
    Seam("torch._inductor", "", "aoti_compile_and_package", ExportStep.AOTI_COMPILE),
    Seam("torch._inductor", "", "aoti_load_package", ExportStep.AOTI_LOAD),
    Seam("torch._inductor", "torch.export.pt2_archive._package:AOTICompiledModel", "__call__", ExportStep.AOTI_RUN),
)


def replace_seam(seam: Seam, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    """Set `seam`'s attribute to `wrap(current)`; the seam's module must be imported (it is: the caller
    runs after that import)."""
    owner = _owner(seam)
    setattr(owner, seam.attribute, wrap(getattr(owner, seam.attribute)))


def _owner(seam: Seam) -> Any:
    module_name, _, class_name = seam.owner.rpartition(":")
    module = importlib.import_module(module_name or seam.module)
    return getattr(module, class_name) if class_name else module


def seams_checkpoint() -> Callable[[], None]:
    """Every seam as it is now (their modules imported here), and `restore()` that puts them back: an
    interpreter reused for several runs (`processes.servers`) must not keep one run's export overrides."""
    importlib.import_module("torch._inductor")
    kept = [(owner, seam.attribute, getattr(owner, seam.attribute)) for seam in SEAMS for owner in [_owner(seam)]]
    kept.append((EagerPackage, "__call__", EagerPackage.__call__))

    def restore() -> None:
        for owner, attribute, value in kept:
            setattr(owner, attribute, value)

    return restore


def is_strict(kwargs: dict[str, Any]) -> bool:
    """Whether a `torch.export.export` call traces strictly (`strict` is keyword-only, default False)."""
    return bool(kwargs.get("strict", False))


class EagerProgram:
    """Stands in for an ExportedProgram when export is turned off: `module()` is the module export was
    given, run eagerly as it is; `run_decompositions` returns the stand-in; AOTInductor turned off keeps it
    as it keeps a program (`EagerPackages`). Anything else a script reads of a program is not there."""

    def __init__(self, module: Any) -> None:
        self._module = module

    def module(self) -> Any:
        return self._module

    def run_decompositions(self, *_args: Any, **_kwargs: Any) -> EagerProgram:
        return self

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"export is turned off (pt2doctor): its stand-in for an ExportedProgram has no {name!r}")


class EagerPackage:
    """Stands in for a loaded AOTInductor package: calls the exported program's module, eagerly."""

    def __init__(self, exported_program: Any) -> None:
        self._module = exported_program.module()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._module(*args, **kwargs)


class EagerPackages:
    """AOTInductor turned off: `compile` keeps the exported program instead of compiling it and returns
    the package path it would have written (a fresh temporary one when none is given); `load` of that
    path returns an `EagerPackage`. A path this process did not compile loads for real."""

    def __init__(self) -> None:
        self._programs: dict[str, Any] = {}

    def compile(self, exported_program: Any, *_args: Any, package_path: Any = None, **_kwargs: Any) -> Any:
        if package_path is None:
            handle, package_path = tempfile.mkstemp(suffix=".pt2", prefix="pt2doctor-eager-")
            os.close(handle)
        self._programs[self._key(package_path)] = exported_program
        return package_path

    def load(self, real_load: Callable[..., Any], path: Any, *args: Any, **kwargs: Any) -> Any:
        program = self._programs.get(self._key(path))
        return EagerPackage(program) if program is not None else real_load(path, *args, **kwargs)

    @staticmethod
    def _key(path: Any) -> str:
        return os.path.abspath(os.fspath(path)) if isinstance(path, (str, os.PathLike)) else f"id:{id(path)}"


def export_arguments(export: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """A `torch.export.export` call's arguments by name (mod, args, kwargs, dynamic_shapes, strict, ...)."""
    bound = inspect.signature(export).bind(*args, **kwargs)
    return dict(bound.arguments)


@dataclass(frozen=True, slots=True)
class DraftFailure:
    """One failure of a draft_export report: torch's type name (`DATA_DEPENDENT_ERROR`...) and data."""

    kind: str
    data: dict[str, Any]


def draft_failures(call: dict[str, Any], log_dir: str) -> tuple[list[DraftFailure], dict[int, str]]:
    """draft_export with the arguments of an export call (`export_arguments`): its failures and the file
    table their frames use. torch's own logging is silenced meanwhile (draft_export warns on stderr,
    which is the script's), and draft_export's log file goes to `log_dir`, not the temporary directory."""
    import torch
    from torch._logging import _internal

    names = inspect.signature(torch.export.draft_export).parameters
    options = {k: v for k, v in call.items() if k in names and k not in ("mod", "args", "kwargs")}
    with _kept_trace_handlers(), _quiet_torch_logs(), _environ(_internal.DTRACE_ENV_VAR, log_dir):
        ep = torch.export.draft_export(call["mod"], call["args"], call.get("kwargs"), **options)
    report = ep._report
    failures = [DraftFailure(str(f.failure_type), dict(f.data)) for f in report.failures]
    # a file the process's trace already interned is not logged again, so not in the report's table
    files = {number: text for text, number in interned_strings().items()}
    return failures, {**files, **report.str_to_filename}


@contextmanager
def _kept_trace_handlers() -> Iterator[None]:
    logger = logging.getLogger("torch.__trace")
    handlers = list(logger.handlers)
    try:
        yield
    finally:
        for handler in handlers:
            if handler not in logger.handlers:
                logger.addHandler(handler)


@contextmanager
def _quiet_torch_logs() -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)
               if (name == "torch" or name.startswith("torch.")) and name != "torch.__trace"]
    before = [logger.disabled for logger in loggers]
    for logger in loggers:
        logger.disabled = True
    try:
        yield
    finally:
        for logger, disabled in zip(loggers, before):
            logger.disabled = disabled


@contextmanager
def _environ(name: str, value: str) -> Iterator[None]:
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


@dataclass(frozen=True, slots=True)
class ProgramInterface:
    """What an exported program declares it returns and mutates (`ep.graph_signature.output_specs`)."""

    user_outputs: int
    mutated_inputs: tuple[str, ...]
    mutated_buffers: tuple[str, ...]


def program_interface(exported_program: Any) -> ProgramInterface:
    from torch.export.graph_signature import OutputKind

    specs = exported_program.graph_signature.output_specs
    return ProgramInterface(
        user_outputs=sum(1 for s in specs if s.kind is OutputKind.USER_OUTPUT),
        mutated_inputs=tuple(sorted(str(s.target) for s in specs if s.kind is OutputKind.USER_INPUT_MUTATION)),
        mutated_buffers=tuple(sorted(str(s.target) for s in specs if s.kind is OutputKind.BUFFER_MUTATION)),
    )

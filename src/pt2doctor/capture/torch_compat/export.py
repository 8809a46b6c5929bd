"""The torch.export and AOTInductor entry points that the diagnose child observes (and, for a what-if run,
replaces), by module and attribute. See the package contract in `torch_compat/__init__.py`.

Checked on torch 2.13.0 (CPU): `torch.export.export(mod, args, kwargs=None, *, strict=False, ...)`,
`torch.export.exported_program.ExportedProgram.run_decompositions`,
`torch._inductor.aoti_compile_and_package(ep, *, package_path=None, inductor_configs=None) -> str`,
`torch._inductor.aoti_load_package(path, ...) -> AOTICompiledModel`, whose class lives in
`torch.export.pt2_archive._package` and is called like the exported module. torch has no hook around
these calls, so they are replaced by wrappers; a wrapper must call through with the same arguments.
"""

from __future__ import annotations

import importlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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
    module_name, _, class_name = seam.owner.rpartition(":")
    module = importlib.import_module(module_name or seam.module)
    owner = getattr(module, class_name) if class_name else module
    setattr(owner, seam.attribute, wrap(getattr(owner, seam.attribute)))


def is_strict(kwargs: dict[str, Any]) -> bool:
    """Whether a `torch.export.export` call traces strictly (`strict` is keyword-only, default False)."""
    return bool(kwargs.get("strict", False))


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

"""Run a callback right after a module is imported, without importing it ourselves.

Contract: `when_imported(name, callback)` calls `callback()` once: now, when `name` is already in
`sys.modules`, else right after its import completes (the module's code has run), from inside that
import. The child installs its export observer this way, so a script that never imports torch (or
Inductor) pays nothing for it. A callback that raises is reported on stderr and does not fail the
import: observing must never change the program.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import traceback
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any


def when_imported(name: str, callback: Callable[[], None]) -> None:
    if name in sys.modules:
        _call(callback)
        return
    finder = next((f for f in sys.meta_path if isinstance(f, _AfterImport)), None)
    if finder is None:
        finder = _AfterImport()
        sys.meta_path.insert(0, finder)
    finder.pending.setdefault(name, []).append(callback)


def _call(callback: Callable[[], None]) -> None:
    try:
        callback()
    except Exception:
        sys.stderr.write("pt2doctor: an export observer failed to install (the script runs unobserved):\n")
        traceback.print_exc()


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: asks the finders after it, then wraps the loader to run the callbacks."""

    def __init__(self) -> None:
        self.pending: dict[str, list[Callable[[], None]]] = {}

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.pending:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, self.pending.pop(fullname))
                return spec
        return None


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: Any, callbacks: list[Callable[[], None]]) -> None:
        self._inner = inner
        self._callbacks = callbacks

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        for callback in self._callbacks:
            _call(callback)

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, is_package...: the real loader's
        return getattr(self._inner, name)

"""pt2doctor: diagnose torch.compile problems (graph breaks, recompiles, compile time, crashes).

Contract: `import pt2doctor` is cheap and imports no torch; the Python APIs load on first use
(PEP 562 `__getattr__`):

- `explain(fn)(*args, **kwargs)`: torch's `explain`, with the cookbook's rewrite for each break.
- `watch()`: `with pt2doctor.watch() as w: ...` observes compilation in this process; `w.session`
  holds the `Session` once the block ends.
- `CompileProfiler`: the recompilation profiler of the PyTorch docs, as a `torch.compile` backend.
- `minify`: reduce a failing compiled program to a minimal repro (`pt2doctor.reduce.api`).
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "explain": "pt2doctor.api.explain",
    "watch": "pt2doctor.api.watch",
    "CompileProfiler": "pt2doctor.api.profiler",
    "minify": "pt2doctor.reduce.api",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pt2doctor' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

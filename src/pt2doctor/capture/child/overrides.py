"""Apply a what-if configuration inside the child, before the user's script runs.

Contract: `install(spec)` is called once by `capture/child/__main__.py` with the child spec's `Overrides`
(`model.child`). Every field is optional:

- `dynamo_config` / `inductor_config` / `compiler_config`: `{name: value}` set on `torch._dynamo.config`,
  `torch._inductor.config`, `torch.compiler.config`. An unknown name raises (a typo must not pass as
  "the fix did not help").
- `mark_dynamic`: torch source names with an optional dim (`"L['x']:0"`), appended to
  `torch.compiler.config.dynamic_sources`: the supported way to mark an input dynamic without editing
  the script, and it wins over `dynamic=False` (torch/compiler/config.py, 2.13).
- `mark_unbacked`: the same, appended to `torch.compiler.config.unbacked_sources` (what
  `torch._dynamo.decorators.mark_unbacked` does in code: no 0/1 specialization for that size).
- `reorderable_print`: add `print` to `torch._dynamo.config.reorderable_logging_functions`.
- `compile_kwargs`: keyword arguments forced onto every `torch.compile` call (e.g. `{"dynamic": true}`),
  through `torch_compat.patch_torch_compile`, the one place that replaces a torch function.
- `stance`: `torch.compiler.set_stance(stance)` before the script runs (`"force_eager"`: compilation
  off, the user-error check of `diagnose`); with `stance_pinned`, later `set_stance` calls change nothing
  (`torch_compat.pin_stance`: a PyTorch `TestCase` sets "default" before each test).
- `seed`: seed `random`, `torch` (and NumPy when importable) so two runs draw the same inputs.
- `record_outputs`: a path; the return values of the first `max_calls` calls of every compiled
  callable are summarized to it, one `model.outputs.OutputRecord` a line (`summarize`), so the parent
  can compare a baseline run with a what-if run without importing torch.
- `time_calls`: a path; each call of every compiled callable is timed (to the end of its kernels on a GPU,
  which the timer waits for), and the times are written there as a `CallTimes` record when the script exits.
"""

from __future__ import annotations

import atexit
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pt2doctor.capture import torch_compat
from pt2doctor.model.child import CallTimes, Overrides
from pt2doctor.model.outputs import (
    DictSummary,
    FloatSummary,
    OtherSummary,
    OutputRecord,
    PySummary,
    SeqSummary,
    TensorSummary,
    ValueSummary,
    number,
)
from pt2doctor.model.serialize import append_line, write_record

_CONFIG_KEYS = {"dynamo_config": "dynamo", "inductor_config": "inductor", "compiler_config": "compiler"}
MAX_CALLS = 32


def install(spec: Overrides) -> None:
    for key, module_name in _CONFIG_KEYS.items():
        _set_config(torch_compat.config_module(module_name), getattr(spec, key))
    if spec.mark_dynamic:
        _add_sources("dynamic_sources", list(spec.mark_dynamic))
    if spec.mark_unbacked:
        _add_sources("unbacked_sources", list(spec.mark_unbacked))
    if spec.reorderable_print:
        torch_compat.dynamo_config().reorderable_logging_functions.add(print)
    if spec.stance and spec.stance_pinned:
        torch_compat.pin_stance(spec.stance)
    elif spec.stance:
        import torch

        torch.compiler.set_stance(spec.stance)
    if spec.seed is not None:
        _seed(spec.seed)
    recorder = _Recorder(spec.record_outputs, spec.max_calls or MAX_CALLS) if spec.record_outputs else None
    timer = _Timer(spec.time_calls) if spec.time_calls else None
    wraps: list[Callable[[Any], Any]] = [w.wrap for w in (recorder, timer) if w is not None]
    if spec.compile_kwargs or wraps:
        torch_compat.patch_torch_compile(dict(spec.compile_kwargs), _chained(wraps) if wraps else None)


def _chained(wraps: list[Callable[[Any], Any]]) -> Callable[[Any], Any]:
    def wrap(compiled: Any) -> Any:
        for one in wraps:
            compiled = one(compiled)
        return compiled
    return wrap


class _Timer:
    """Time each call of every compiled callable; write the times (`CallTimes`) at exit."""

    def __init__(self, path: str) -> None:
        self._calls: list[list[float]] = []
        atexit.register(lambda: write_record(Path(path), CallTimes(tuple(tuple(c) for c in self._calls))))

    def wrap(self, compiled: Any) -> Any:
        import functools

        import torch

        times: list[float] = []
        self._calls.append(times)

        def synced() -> float:
            if torch.cuda.is_initialized():
                torch.cuda.synchronize()
            return time.perf_counter()

        if isinstance(compiled, torch.nn.Module):
            started: list[float] = []
            compiled.register_forward_pre_hook(lambda _mod, _args: started.append(synced()))
            compiled.register_forward_hook(lambda _mod, _args, _out: times.append(synced() - started.pop()))
            return compiled

        @functools.wraps(compiled)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = synced()
            out = compiled(*args, **kwargs)
            times.append(synced() - start)
            return out

        return timed


def _set_config(module: Any, values: dict[str, Any]) -> None:
    for name, value in values.items():
        if not hasattr(module, name):
            raise AttributeError(f"{module.__name__} has no option {name!r}")
        setattr(module, name, value)


def _add_sources(option: str, sources: list[str]) -> None:
    config = torch_compat.config_module("compiler")
    existing = [s for s in (getattr(config, option) or "").split(",") if s.strip()]
    setattr(config, option, ",".join(dict.fromkeys(existing + sources)))


def _seed(seed: int) -> None:
    import torch

    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy
    except ImportError:
        return
    numpy.random.seed(seed)


class _Recorder:
    """Append a summary of each compiled callable's first calls to a JSON-lines file."""

    def __init__(self, path: str, max_calls: int) -> None:
        self._path = path
        self._max = max_calls
        self._count = 0

    def wrap(self, compiled: Any) -> Any:
        import functools

        import torch

        index, self._count = self._count, self._count + 1
        calls = [0]

        def record(out: Any) -> None:
            if calls[0] < self._max:
                self._write(index, calls[0], out)
            calls[0] += 1

        if isinstance(compiled, torch.nn.Module):
            compiled.register_forward_hook(lambda _mod, _args, out: record(out))
            return compiled

        @functools.wraps(compiled)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            out = compiled(*args, **kwargs)
            record(out)
            return out

        return wrapper

    def _write(self, index: int, call: int, out: Any) -> None:
        with open(self._path, "a") as handle:
            append_line(handle, OutputRecord(index, call, summarize(out)))


_MAX_VALUES = 4096


def summarize(value: Any) -> ValueSummary:
    """A return value's summary: tensors as dtype, shape and their first values."""
    import torch

    if isinstance(value, torch.Tensor):
        flat = value.detach().reshape(-1)[:_MAX_VALUES]
        values = flat.to(torch.float64 if not flat.is_complex() else torch.complex128).cpu()
        numbers = values.abs().tolist() if values.is_complex() else values.tolist()
        return TensorSummary(str(value.dtype), tuple(value.shape), tuple(number(n) for n in numbers))
    if isinstance(value, dict):
        return DictSummary({str(k): summarize(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return SeqSummary(tuple(summarize(v) for v in value))
    if isinstance(value, float):
        return FloatSummary(number(value))
    if isinstance(value, (bool, int, str)) or value is None:
        return PySummary(value)
    return OtherSummary(type(value).__name__)

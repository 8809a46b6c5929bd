"""Private torch APIs for observing a run: the structured trace, config, the in-process watch,
CompileProfiler and the what-if overrides (capture.watch, api/, capture/child/overrides.py). See the package
contract in `torch_compat/__init__.py`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pt2doctor.model.torch_text import CONFIG_MODULES


def trace_logger() -> logging.Logger:
    """The `torch.__trace` logger that TORCH_TRACE writes through (2.11, 2.13)."""
    from torch._logging import _internal

    return _internal.trace_log


def trace_formatter() -> logging.Formatter:
    """The formatter TORCH_TRACE uses, so in-process capture writes the same line format."""
    from torch._logging._internal import TorchLogsFormatter

    return TorchLogsFormatter(trace=True)


def dynamo_explain(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`torch._dynamo.explain(fn)` -> callable returning ExplainOutput (2.11, 2.13)."""
    import torch._dynamo

    return torch._dynamo.explain(fn)


def config_diff() -> dict[str, str]:
    """Non-default `torch._dynamo` / `torch._inductor` / `torch._functorch` config, as `name -> repr`.

    Uses ConfigModule's `_config` entries and `_is_default` (2.11, 2.13), skipping aliases (they
    mirror another key), deprecated keys and keys holding their default value. Modules never imported are skipped:
    importing Inductor only to report its config would cost seconds.
    """
    import sys
    import warnings

    diff: dict[str, str] = {}
    for name in (CONFIG_MODULES[short] for short in ("dynamo", "inductor", "functorch")):
        module = sys.modules.get(name)
        entries = getattr(module, "_config", None)
        is_default = getattr(module, "_is_default", None)
        if not isinstance(entries, dict) or is_default is None:
            continue
        for key, entry in entries.items():
            if getattr(entry, "alias", None) is not None or getattr(entry, "deprecated", False):
                continue
            try:
                if is_default(key):
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    value = getattr(module, key)
            except Exception:
                continue
            if not callable(value) and not _equals_default(value, entry) and f"{name}.{key}" not in OWN_SETTINGS:
                diff[f"{name}.{key}"] = repr(value)
    return diff


# Config keys pt2doctor itself set in this process (the graph recorder turns AOTAutograd's cache off):
# not the user's settings, so not in the config an issue report quotes.
OWN_SETTINGS: set[str] = set()


def _equals_default(value: Any, entry: Any) -> bool:
    """Torch's own `config.patch(...)` contexts mark a key overridden even when they set its default
    again (2.13: `deterministic`, `inplace_buffers`, ...): compare values too."""
    try:
        return bool(value == getattr(entry, "default", object()))
    except Exception:
        return False


def reset_dynamo() -> None:
    import torch._dynamo

    torch._dynamo.reset()


def interned_strings() -> dict[str, int]:
    """Structured tracing's string intern table, `text -> id` (`torch._logging.structured.INTERN_TABLE`, 2.13).

    Strings are interned once per process; a watch that starts later must re-emit them so stacks resolve.
    """
    from torch._logging import structured

    return dict(getattr(structured, "INTERN_TABLE", {}))


def dynamo_config() -> Any:
    """`torch._dynamo.config` (a ConfigModule: `patch`, attribute get/set) (2.11, 2.13)."""
    import torch._dynamo.config

    return torch._dynamo.config


def config_module(name: str) -> Any:
    """A torch config module by short name: dynamo, inductor, compiler (`torch.compiler.config`) (2.13)."""
    import importlib

    return importlib.import_module(CONFIG_MODULES[name])


def patch_torch_compile(extra_kwargs: dict[str, Any], on_compiled: Callable[[Any], Any] | None = None) -> None:
    """Replace `torch.compile` so every call gets `extra_kwargs` (overriding the script's own), and pass
    each compiled callable through `on_compiled`. Only the what-if child calls this, before the script
    runs; torch has no supported seam for "compile everything with dynamic=True" (2.13).
    """
    import functools

    import torch

    original = torch.compile

    def _finish(compiled: Any) -> Any:
        return on_compiled(compiled) if on_compiled is not None else compiled

    @functools.wraps(original)
    def compile(model: Any = None, **kwargs: Any) -> Any:
        kwargs.update(extra_kwargs)
        if model is None:  # used as `@torch.compile(...)`
            return lambda fn: _finish(original(fn, **kwargs))
        return _finish(original(model, **kwargs))

    torch.compile = compile  # type: ignore[assignment]


def pin_stance(stance: str) -> None:
    """`torch.compiler.set_stance(stance)` for the rest of the process: later calls change nothing (PyTorch's
    `TestCase.run` sets "default" before each test, which would turn compilation back on in a run that must
    have it off). As a decorator or context manager a later call is inert too."""
    import contextlib

    import torch

    torch.compiler.set_stance(stance)

    class _Kept(contextlib.nullcontext):  # type: ignore[type-arg]
        def __call__(self, fn: Any) -> Any:
            return fn

    torch.compiler.set_stance = lambda *args, **kwargs: _Kept()  # type: ignore[assignment]


# torch._inductor.config.log_tlparse (2.13), read from the environment when the config is imported: Inductor
# then logs each graph's per-op runtime estimates and output metadata (`inductor_runtime_and_tensor_meta`)
RUNTIME_ESTIMATES_ENV = ("LOG_TLPARSE", "1")


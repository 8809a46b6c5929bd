"""Every private torch API pt2doctor touches, in one place, with the versions it was checked on.

Contract: the rest of pt2doctor imports torch internals only through this module. Each function
says which torch versions it was checked on; when a later torch moves something, the fix is here.
Checked on: torch 2.13.0 (CPU, this repo's CI) and 2.11 (CUDA, the lent GPU machine).
Functions are grouped by the pt2doctor subsystem that needs them; new groups are appended.
"""

from __future__ import annotations

import logging
from typing import Any, Callable


# --- structured trace (capture.watch) ---------------------------------------------------------

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
    mirror another key) and deprecated keys. Modules never imported are skipped: importing Inductor
    only to report its config would cost seconds.
    """
    import sys
    import warnings

    diff: dict[str, str] = {}
    for name in ("torch._dynamo.config", "torch._inductor.config", "torch._functorch.config"):
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
            if not callable(value):
                diff[f"{name}.{key}"] = repr(value)
    return diff


def reset_dynamo() -> None:
    import torch._dynamo

    torch._dynamo.reset()

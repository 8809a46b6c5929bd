"""A bytecode cache for pt2doctor's own interpreters, where torch's modules have none.

Contract: where torch's modules have their bytecode beside them (what `pip install` writes), nothing
changes. Where they have none (an image built with `PYTHONDONTWRITEBYTECODE=1` or `pip install
--no-compile`, common in containers), every interpreter compiles torch's few thousand modules from
source when it imports them, seconds for Inductor alone (docs/design/minifier.md, "Interpreter
start-up", has the measurements). Then:
- `worker_env(env)` gives the interpreters pt2doctor starts for its own work (the minifier's zygote
  and servers, the verifier, the bisector) `PYTHONPYCACHEPREFIX` = pt2doctor's cache, without
  `PYTHONDONTWRITEBYTECODE`: the first one writes the bytecode there, the later ones read it;
- `use_in_this_process()` does the same for the running interpreter (`sys.pycache_prefix`), called
  by the CLI before it imports torch.
Bytecode changes where compiled modules are kept, never what a program computes; the user's own
runs of their script (`run`, `diagnose`'s variants) keep the user's environment as it is. Never
touches torch's directory. Torch-free: the CLI calls it before importing torch.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

PREFIX_ENV = "PYTHONPYCACHEPREFIX"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pt2doctor" / "pycache"


def torch_lacks_bytecode() -> bool:
    """Whether importing torch here compiles it from source (no bytecode where Python looks for it)."""
    try:
        spec = importlib.util.find_spec("torch")  # finds the package without importing it
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            return False
        return not os.path.exists(importlib.util.cache_from_source(spec.origin))
    except (ImportError, NotImplementedError, ValueError):  # no torch, or no bytecode for this Python
        return False


def worker_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for an interpreter pt2doctor starts for its own work (see the contract)."""
    env = dict(os.environ if env is None else env)
    if env.get(PREFIX_ENV):  # the user's own choice
        return env
    prefix = sys.pycache_prefix or (str(cache_dir()) if torch_lacks_bytecode() else None)
    if prefix:
        env[PREFIX_ENV] = prefix
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def use_in_this_process() -> None:
    """Where torch lacks bytecode, keep this interpreter's in pt2doctor's cache from now on."""
    if sys.pycache_prefix is None and torch_lacks_bytecode():
        sys.pycache_prefix = str(cache_dir())
        sys.dont_write_bytecode = False

"""`pt2doctor.watch()`: observe torch.compile in this process and get the same `Session` a `run` gives.

Contract: `with watch() as w: ...` attaches a handler to torch's structured-trace logger (the logger
TORCH_TRACE writes through) that writes to a private temporary file, and removes it in `finally`,
also when the block raises. `w.session` is `None` inside the block and the final `Session` after it
(built with `read_trace` + `build_session` via `trace_import`, like a child run, so every analysis applies). Nothing is
compiled differently: the handler only listens. A raised exception is not recorded as a failure
(it propagates to the caller as usual); compile failures the trace records are.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from pt2doctor.capture import torch_compat
from pt2doctor.capture.trace.trace_import import session_from_trace
from pt2doctor.model import Environment, Extras, Session


@dataclass(slots=True)
class Watch:
    """What `watch()` yields: `session` is filled when the block ends (`None` until then)."""

    trace_path: Path
    session: Session | None = None


@contextmanager
def watch(*, keep_trace: str | os.PathLike[str] | None = None) -> Iterator[Watch]:
    """Observe compilation inside the block. `keep_trace` copies the raw trace there (for tlparse)."""
    folder = Path(tempfile.mkdtemp(prefix="pt2doctor-watch-"))
    holder = Watch(folder / "trace.log")
    _write_intern_table(holder.trace_path)
    logger = torch_compat.trace_logger()
    handler = logging.FileHandler(holder.trace_path, encoding="utf-8")
    handler.setFormatter(torch_compat.trace_formatter())
    handler.setLevel(logging.DEBUG)
    started = time.time()
    logger.addHandler(handler)
    try:
        yield holder
    finally:
        logger.removeHandler(handler)
        handler.close()
        holder.session = session_from_file(holder.trace_path, started, time.time() - started)
        if keep_trace is not None:
            shutil.copyfile(holder.trace_path, Path(keep_trace))
        shutil.rmtree(folder, ignore_errors=True)


def _write_intern_table(path: Path) -> None:
    """Strings torch interned before the watch began; later stack frames refer to them by id."""
    with open(path, "w", encoding="utf-8") as handle:
        for text, ident in torch_compat.interned_strings().items():
            handle.write(f"V0000 00:00:00.000000 {os.getpid()} pt2doctor/watch.py:0] "
                         f"{json.dumps({'str': [text, ident]})}\n")


def session_from_file(path: Path, started: float, wall: float) -> Session:
    session = session_from_trace(path)
    version = session.torch_version or getattr(sys.modules.get("torch"), "__version__", None)
    return replace(session, torch_version=version, command=("<watch>",), cwd=os.getcwd(), started_at=started,
                   wall_s=wall, trace=replace(session.trace, files=()), environment=Environment(torch=version),
                   extras=Extras(source="watch", torch_imported=True))

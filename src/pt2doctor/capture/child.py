"""The child-process bootstrap: run the user's script exactly as `python SCRIPT ARGS` would.

Contract: invoked as `python -m pt2doctor.capture.child SCRIPT [ARGS...]` with `PT2DOCTOR_META` naming
a JSON file to write. The script runs as `__main__` with its own argv, `sys.path[0]` and cwd; its
stdin/stdout/stderr are untouched. This module writes the sidecar (exception, exit code, environment)
and then behaves like Python: an uncaught exception prints its traceback and exits 1, `sys.exit(n)`
exits n. A native crash leaves the sidecar unwritten, but faulthandler's dump names the Python stack.
Options arrive as environment variables (`PT2DOCTOR_*`) so the script's argv stays its own.
"""

from __future__ import annotations

import faulthandler
import json
import os
import platform
import runpy
import sys
import time
import traceback
from types import TracebackType
from typing import Any

_MAX_MESSAGE = 20_000


def _exception_record(exc: BaseException) -> dict[str, Any]:
    chain, seen, cur = [], set(), exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        chain.append(f"{_qualname(type(cur))}: {str(cur).strip()[:2000]}")
        inner = getattr(cur, "inner_exception", None)
        cur = cur.__cause__ or inner or (None if cur.__suppress_context__ else cur.__context__)
    tb: TracebackType | None = exc.__traceback__
    frames = [{"file": f.filename, "line": f.lineno or 0, "function": f.name, "code": (f.line or "").strip()}
              for f in traceback.extract_tb(tb)]
    if isinstance(exc, SyntaxError) and exc.filename:
        frames.append({"file": exc.filename, "line": exc.lineno or 0, "function": "<module>",
                       "code": (exc.text or "").strip()})
    return {
        "type": _qualname(type(exc)),
        "message": str(exc)[:_MAX_MESSAGE],
        "chain": chain,
        "frames": frames,
        "traceback": "".join(traceback.format_exception(exc))[-_MAX_MESSAGE:],
        "raised_by_graph": getattr(exc, "_pt2doctor_raised_by_graph", None),  # call_counter.RAISED_BY
    }


def _qualname(kind: type) -> str:
    module = kind.__module__
    return kind.__qualname__ if module in ("builtins", "__main__") else f"{module}.{kind.__qualname__}"


def _environment() -> dict[str, Any]:
    env: dict[str, Any] = {"python": sys.version.split()[0], "platform": platform.platform()}
    torch = sys.modules.get("torch")
    if torch is None:
        return env
    env["torch"] = getattr(torch, "__version__", None)
    try:
        from pt2doctor.capture import torch_env

        env.update(torch_env.describe(torch))
    except Exception as exc:  # environment facts are best effort; never mask the script's outcome
        env["error"] = repr(exc)
    return env


def _write_meta(path: str, record: dict[str, Any]) -> None:
    if _call_counts is not None:
        record["calls"] = _call_counts()
    record["environment"] = _environment()
    record["torch_imported"] = "torch" in sys.modules
    tmp = f"{path}.tmp"
    with open(tmp, "w") as handle:
        json.dump(record, handle, default=str)
    os.replace(tmp, path)


_call_counts: Any = None


def _install_hooks() -> None:
    global _call_counts
    if os.environ.get("PT2DOCTOR_ACCURACY"):  # before the counter, whose wrapper must count only the program's calls
        from pt2doctor.capture import accuracy_probe

        accuracy_probe.install(json.loads(os.environ["PT2DOCTOR_ACCURACY"]))
    if os.environ.get("TORCH_TRACE"):  # a traced run: count how often each compiled graph runs
        from pt2doctor.capture import call_counter

        _call_counts = call_counter.install()
    record_dir = os.environ.get("PT2DOCTOR_RECORD")
    if record_dir:
        from pt2doctor.capture import graph_recorder

        graph_recorder.install(__import__("pathlib").Path(record_dir))
    if os.environ.get("PT2DOCTOR_FRAME_RECORD"):
        from pt2doctor.capture import frame_recorder

        frame_recorder.install(__import__("pathlib").Path(os.environ["PT2DOCTOR_FRAME_RECORD"]))
    if os.environ.get("PT2DOCTOR_OVERRIDES"):
        from pt2doctor.capture import overrides

        overrides.install(json.loads(os.environ["PT2DOCTOR_OVERRIDES"]))


def main() -> None:
    if len(sys.argv) < 2:
        sys.stderr.write("usage: python -m pt2doctor.capture.child SCRIPT [ARGS...]\n")
        sys.exit(64)
    script = os.path.abspath(sys.argv[1])
    meta = os.environ.get("PT2DOCTOR_META")
    crash_log = os.environ.get("PT2DOCTOR_FAULTHANDLER")
    if crash_log:
        stream = open(crash_log, "w")  # noqa: SIM115 - must stay open until the process ends
        faulthandler.enable(file=stream, all_threads=True)
        timeout = float(os.environ.get("PT2DOCTOR_TIMEOUT") or 0)
        if timeout > 2:
            # Dump where the script is just before the parent stops it, so a hang names its line.
            faulthandler.dump_traceback_later(timeout - 1.0, exit=False, file=stream)
    sys.argv = [sys.argv[1], *sys.argv[2:]]
    sys.path[0] = os.path.dirname(script)
    started = time.time()
    _install_hooks()
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if meta:
            _write_meta(meta, {"exit_code": code, "wall_s": time.time() - started})
        raise
    except BaseException as exc:
        if meta:
            _write_meta(meta, {"exit_code": 1, "exception": _exception_record(exc), "wall_s": time.time() - started})
        raise
    if meta:
        _write_meta(meta, {"exit_code": 0, "wall_s": time.time() - started})


if __name__ == "__main__":
    main()

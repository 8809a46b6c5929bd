"""Record the frame Dynamo failed on, so it can be replayed alone (the guide's record/replay, made to work).

Contract: `install(out_dir)` (in the child, the spec's `frame_record_dir`) hooks the handler Dynamo
calls when a frame fails to compile and writes `DIR/frame-<name>-<line>.pkl` with `dill`: the
frame's code, the globals it names (modules by reference, the script's own functions by value),
its arguments as they were on entry, its closure, and whether the failure was a graph break (replayed
with `fullgraph=True`), with a `FrameSummary` beside it (`.json`, `model.child`)
so the parent never unpickles what would import the script's modules. `write_replay(record, script_dir, path)` writes
`replay.py`, a program that needs torch and dill only and compiles that one frame again with `backend="eager"`.

Why not `torch._dynamo.replay`: its recordings are taken only for non-graph-break errors, keep
modules as stubs holding only the attributes the failing frame touched (a helper reached through an
inlined call is missing on replay), and the replay itself runs under compile id 42/999, past the
accumulated recompile limit (256), so it stops with "recompile limit exceeded" (torch 2.13).
"""

from __future__ import annotations

import inspect
import types
from pathlib import Path
from typing import Any

from pt2doctor.capture import torch_compat
from pt2doctor.model.child import FrameSummary
from pt2doctor.model.serialize import read_record, write_record

_done: set[Any] = set()


def install(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)

    def on_failure(original: Any, exc: Exception, code: Any, frame: Any, export: bool) -> None:
        if frame is not None and code not in _done:
            _done.add(code)
            try:
                _record(out_dir, exc, code, frame)
            except Exception as why:  # a recording must never change how the script fails
                (out_dir / f"frame-{code.co_name}-{code.co_firstlineno}.error").write_text(repr(why))
        return original(exc, code, frame, export=export)

    torch_compat.patch_dynamo_exception_handler(on_failure)


def _record(out_dir: Path, exc: Exception, code: types.CodeType, frame: Any) -> None:
    import dill

    args, kwargs = _arguments(code, dict(frame.f_locals))
    record: dict[str, Any] = {
        "code": code, "name": code.co_name, "file": code.co_filename, "line": code.co_firstlineno,
        "globals": {n: frame.f_globals[n] for n in _global_names(code) if n in frame.f_globals},
        "closure": tuple(frame.closure or ()), "args": args, "kwargs": kwargs,
        "fullgraph": torch_compat.is_graph_break(exc), "dynamic": torch_compat.compile_dynamic(),
        "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
    }
    path = out_dir / f"frame-{code.co_name}-{code.co_firstlineno}.pkl"
    path.write_bytes(dill.dumps(record, recurse=True))
    write_record(path.with_suffix(".json"), FrameSummary(**{k: record[k] for k in FrameSummary.__struct_fields__}))


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _arguments(code: types.CodeType, f_locals: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    names = code.co_varnames
    count, kwonly = code.co_argcount, code.co_kwonlyargcount
    args = [f_locals[n] for n in names[:count]]
    kwargs = {n: f_locals[n] for n in names[count:count + kwonly]}
    index = count + kwonly
    if code.co_flags & inspect.CO_VARARGS:
        args += list(f_locals.get(names[index], ()))
        index += 1
    if code.co_flags & inspect.CO_VARKEYWORDS:
        kwargs.update(f_locals.get(names[index], {}))
    return args, kwargs


REPLAY = '''"""Replay the one frame Dynamo failed on, recorded by pt2doctor diagnose. Needs torch and dill.

Frame: {name} at {file}:{line}
Failure when recorded: {error}
Run `python replay.py`: Dynamo compiles that frame again (backend="eager"{options_note}) and fails
the same way while the bug is present; exit status 0 means it compiled.
"""

import sys
import types

import dill
import torch

sys.path.insert(0, {script_dir!r})  # the script's directory, for the modules it imports
with open({record!r}, "rb") as handle:
    record = dill.load(handle)
fn = types.FunctionType(record["code"], {{**record["globals"], "__builtins__": __builtins__}}, record["name"],
                        None, record["closure"] or None)
torch._dynamo.reset()
compiled = torch.compile(fn, backend="eager", fullgraph=record["fullgraph"], dynamic=record.get("dynamic"))
compiled(*record["args"], **record["kwargs"])
print("replay compiled the frame: the failure did not reproduce")
'''


def write_replay(record: Path, script_dir: Path, path: Path) -> Path:
    """From the recording's JSON summary: unpickling it would import the script's modules here."""
    about = read_record(record.with_suffix(".json"), FrameSummary)
    path.write_text(REPLAY.format(
        name=about.name, file=about.file, line=about.line, error=about.error,
        options_note=(", fullgraph=True" if about.fullgraph else "") + (
            f", dynamic={about.dynamic}" if about.dynamic is not None else ""),
        script_dir=str(script_dir), record=str(record.resolve()),
    ))
    return path

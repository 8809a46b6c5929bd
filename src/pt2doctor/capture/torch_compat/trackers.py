"""Which of Dynamo's variable trackers traced a program's own lines: where to look for a Dynamo-stage bug.

Contract: `dynamo_trackers(program, limit)` runs `program` (a reduced program, a file) as `__main__` in this
interpreter, with Dynamo's per-instruction step wrapped to know which line of `program` it is translating and a
profiler watching `torch/_dynamo/variables/`. It returns where the installed torch defines each tracker method that
ran for one of `program`'s lines, in the order the lines were first translated, at most `limit`, as `SourceRef`s
(`UnspecializedNNModuleVariable.var_getattr`, `RandomVariable.call_method`, `ListIteratorVariable.reconstruct`: the
class that modelled the value and the method that handled what the line did with it). Kept: a tracker's entry
points (`call_function`, `call_method`, `var_getattr`, `reconstruct`, ... and its `call_*` and `method_*`
helpers) defined by the tracker's class itself; left out: the trackers that trace every program (tensors,
constants, builtins, attribute look-ups on modules, lazy wrappers, Dynamo's own StopIteration), whose methods say
nothing about this one. The program's own exit (its failing assert) is swallowed; the hooks are removed before
it returns. Never raises for a torch whose Dynamo moved: it gives nothing. Checked on torch 2.13.0 (CPU).
"""

from __future__ import annotations

import inspect
import os
import runpy
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from pt2doctor.capture.torch_compat.sources import _relative
from pt2doctor.model.diagnosis import SourceRef

_ENTRIES = ("call_function", "call_method", "var_getattr", "const_getattr", "reconstruct", "next_variable",
            "unpack_var_sequence", "call_obj_hasattr")
_EVERY_PROGRAM = {  # trackers every traced program meets: their methods name nothing particular to one bug
    "TensorVariable", "ConstantVariable", "SymNodeVariable", "BuiltinVariable", "GetAttrBuiltinVariable",
    "IterBuiltinVariable", "LazyVariableTracker", "PythonModuleVariable", "ExceptionVariable", "GetAttrVariable",
    "TorchInGraphFunctionVariable", "NullVariable"}


def dynamo_trackers(program: Path, limit: int = 4) -> list[SourceRef]:
    try:
        from torch._dynamo import symbolic_convert
        from torch._dynamo.variables.base import VariableTracker as base
    except ImportError:
        return []
    step = getattr(symbolic_convert.InstructionTranslatorBase, "step", None)
    if step is None:
        return []
    path = str(program.resolve())
    variables = str(Path(symbolic_convert.__file__).parent / "variables") + os.sep
    line: list[int | None] = [None]  # the line of `program` Dynamo is translating now, else None
    seen: dict[tuple[type, type, str], int] = {}  # (tracker, the class defining the method, method) -> its line

    def translating(tx: Any) -> bool:
        outer = line[0]
        ip = tx.instruction_pointer
        inst = tx.instructions[ip] if ip is not None and 0 <= ip < len(tx.instructions) else None
        positions = getattr(inst, "positions", None)
        line[0] = positions.lineno if tx.f_code.co_filename == path and positions is not None else None
        try:
            return step(tx)
        finally:
            line[0] = outer

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event != "call" or line[0] is None or not frame.f_code.co_filename.startswith(variables):
            return
        name = frame.f_code.co_name
        if not (name in _ENTRIES or name.startswith(("call_", "method_"))):
            return
        tracker = type(frame.f_locals.get("self"))
        home = next((k for k in tracker.__mro__ if name in k.__dict__), None)  # the class whose method runs
        if (home is not None and issubclass(tracker, base) and home is not base
                and getattr(inspect.unwrap(home.__dict__[name]), "__code__", None) is frame.f_code  # not a super() call
                and not {tracker.__name__, home.__name__} & _EVERY_PROGRAM):
            seen.setdefault((tracker, home, name), line[0])

    symbolic_convert.InstructionTranslatorBase.step = translating  # type: ignore[method-assign]
    argv = sys.argv
    sys.argv = [path]
    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        runpy.run_path(path, run_name="__main__")
    except BaseException:  # noqa: BLE001 - the program fails as it was reduced to; what Dynamo traced is kept
        pass
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        sys.argv = argv
        symbolic_convert.InstructionTranslatorBase.step = step  # type: ignore[method-assign]
    ordered = sorted(seen.items(), key=lambda item: item[1])
    refs = [ref for (tracker, home, name), at in ordered
            if (ref := _ref(tracker, home, name, program.name, at)) is not None]
    return list({(r.file, r.line): r for r in reversed(refs)}.values())[::-1][:limit]  # a method once, first line


def _ref(tracker: type, home: type, name: str, program: str, line: int) -> SourceRef | None:
    method = inspect.unwrap(home.__dict__[name])  # Dynamo wraps some (a mutation guard): the method as written
    try:
        file = inspect.getsourcefile(method)  # type: ignore[arg-type]
        first = inspect.getsourcelines(method)[1]  # type: ignore[arg-type]
    except (TypeError, OSError):
        return None
    relative = _relative(file)
    if relative is None:
        return None
    modelled = tracker.__name__ if tracker is home else f"{tracker.__name__} (a {home.__name__})"
    return SourceRef(f"Dynamo's {modelled}, which traced {program}:{line}", relative, first,
                     f"{home.__name__}.{name}")

"""What of the compiler a reduced program reached: where to look for a failure no graph shows.

Contract: each function runs `program` (a reduced program, a file) as `__main__` in this interpreter under a
profiler, swallows the program's own exit (its failing assert: what the compiler did before it is kept), removes its
hooks before it returns, and returns at most `limit` `SourceRef`s into the installed torch, in the order the program
first reached them. Never raises for a torch whose internals moved: it gives nothing. Checked on torch 2.13.0 (CPU).
- `dynamo_trackers(program)`: Dynamo's per-instruction step is wrapped to know which line of `program` it translates;
  each tracker method that ran for one of those lines is where the installed torch defines it
  (`UnspecializedNNModuleVariable.var_getattr`, `RandomVariable.call_method`, `ListIteratorVariable.reconstruct`:
  the class that modelled the value and the method that handled what the line did with it). Kept: a tracker's entry
  points (`call_function`, `call_method`, `var_getattr`, `reconstruct`, ... and its `call_*` and `method_*`
  helpers) as the tracker's class resolves them; left out: the trackers every program meets (tensors, constants,
  builtins, attribute look-ups on modules, lazy wrappers, Dynamo's own StopIteration).
- `aot_paths(program, backend)`: the AOTAutograd code (functions, and the generator expressions and comprehensions
  in them, named by their function) the program reached that a plain program compiled with the same `backend` does
  not (a forward with its backward, and an inference call, run first in the same interpreter): the handling its
  graphs needed beyond the common path (`merge_view_inputs`: aliased inputs one of which is mutated).
"""

from __future__ import annotations

import inspect
import os
import runpy
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from pt2doctor.capture.torch_compat.sources import function_ref, torch_relative
from pt2doctor.model.source_refs import SourceRef

_ENTRIES = ("call_function", "call_method", "var_getattr", "const_getattr", "reconstruct", "next_variable",
            "unpack_var_sequence", "call_obj_hasattr")
_EVERY_PROGRAM = {  # trackers every traced program meets: their methods name nothing particular to one bug
    "TensorVariable", "ConstantVariable", "SymNodeVariable", "BuiltinVariable", "GetAttrBuiltinVariable",
    "IterBuiltinVariable", "LazyVariableTracker", "PythonModuleVariable", "ExceptionVariable", "GetAttrVariable",
    "TorchInGraphFunctionVariable", "NullVariable"}
# what every compile with an AOTAutograd backend runs: a forward with its backward, and an inference call
_PLAIN = """import torch
x = torch.randn(4, requires_grad=True)
torch.compile(lambda x: (x.sin() * 2).sum(), backend={backend!r})(x).backward()
torch.compile(lambda x: x.cos() + 1, backend={backend!r})(torch.randn(3))
"""


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

    def called(frame: FrameType) -> None:
        if line[0] is None or not frame.f_code.co_filename.startswith(variables):
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
    try:
        _run(program, called)
    finally:
        symbolic_convert.InstructionTranslatorBase.step = step  # type: ignore[method-assign]
    ordered = sorted(seen.items(), key=lambda item: item[1])
    refs = [ref for (tracker, home, name), at in ordered
            if (ref := _tracker_ref(tracker, home, name, program.name, at)) is not None]
    return _first_each(refs, lambda r: (r.file, r.line))[:limit]  # a method once, where first met


def aot_paths(program: Path, backend: str, limit: int = 4) -> list[SourceRef]:
    try:
        import torch
        import torch._functorch
    except ImportError:
        return []
    package = str(Path(torch._functorch.__file__).parent) + os.sep
    with tempfile.TemporaryDirectory() as folder:
        plain = Path(folder) / "plain.py"
        plain.write_text(_PLAIN.format(backend=backend))
        common = set(_reached(plain, package))
    torch._dynamo.reset()
    reached = _reached(program, package)
    refs = [ref for code, function in reached.items() if code not in common
            if (ref := _code_ref(code, function, program.name)) is not None]
    return _first_each(refs, lambda r: r.function)[:limit]  # a function once, where first reached


def _reached(program: Path, package: str) -> dict[CodeType, str]:
    """The code objects of `package`'s files that ran, in order, each with the function it is or is in."""
    reached: dict[CodeType, str] = {}
    generated: set[str] = set()

    def called(frame: FrameType) -> None:
        code = frame.f_code
        if code in reached or not code.co_filename.startswith(package) or code.co_filename in generated:
            return
        if not os.path.isfile(code.co_filename):  # code AOTAutograd generated for this graph (its wrappers)
            generated.add(code.co_filename)
            return
        outer = frame  # a generator expression or comprehension: named by the function that holds it
        while outer.f_code.co_name.startswith("<") and outer.f_back is not None \
                and outer.f_back.f_code.co_filename == code.co_filename:
            outer = outer.f_back
        reached[code] = outer.f_code.co_qualname if hasattr(outer.f_code, "co_qualname") else outer.f_code.co_name

    _run(program, called)
    return reached


def _first_each(refs: list[SourceRef], key: Callable[[SourceRef], object]) -> list[SourceRef]:
    first: dict[object, SourceRef] = {}
    for ref in refs:
        first.setdefault(key(ref), ref)
    return list(first.values())


def _run(program: Path, called: Callable[[FrameType], None]) -> None:
    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            called(frame)

    argv, sys.argv = sys.argv, [str(program.resolve())]
    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        runpy.run_path(str(program.resolve()), run_name="__main__")
    except BaseException:  # noqa: BLE001 - the program fails as it was reduced to; what the compiler did is kept
        pass
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        sys.argv = argv


def _tracker_ref(tracker: type, home: type, name: str, program: str, line: int) -> SourceRef | None:
    modelled = tracker.__name__ if tracker is home else f"{tracker.__name__} (a {home.__name__})"
    ref = function_ref(f"Dynamo's {modelled}, which traced {program}:{line}", home.__dict__[name])
    return SourceRef(ref.what, ref.file, ref.line, f"{home.__name__}.{name}") if ref else None


def _code_ref(code: CodeType, function: str, program: str) -> SourceRef | None:
    file = torch_relative(code.co_filename)
    if file is None:
        return None
    return SourceRef(f"AOTAutograd's {function}, which {program} reached and a plain compile does not", file,
                     code.co_firstlineno, function)

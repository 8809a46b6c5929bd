"""Judge, inside the run, the exported programs the script derives and runs, against the program each
came from, with pt2doctor's accuracy rule.

Contract: the export observer calls `ExportChecker(log, tol).before(step, args, kwargs)` before a step
runs and `after(step, index, args, kwargs, out, reference)` once it passed, with what `before` returned.
Each judgement appends one `ExportCheck` to `log`:
- `run_decompositions` (args[0]: the exported program, `out`: the decomposed one): both must declare
  the same interface (user outputs, mutated user inputs and buffers) and compute the same values, on
  copies of the program's example inputs, from the same RNG state: outputs and the inputs after the
  call, judged by the rule (`accuracy_probe.compare`);
- an AOTInductor package's first call with each kind of input (shapes, dtypes): the exported program it was compiled
  from (remembered from `aoti_compile_and_package` and `aoti_load_package`) runs first, eagerly, on copies of the call's
  inputs; the package's result is judged against it. A program that rejects the inputs (a failed
  guard) while the package returns a result is a failure: the package computes something the
  program does not define.
Observing never changes the program: every reference run is on copies, under the rule's RNG guard,
and an error while judging is recorded as verdict "error", never raised.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from pt2doctor.capture import torch_compat
from pt2doctor.capture.child.accuracy_probe import compare
from pt2doctor.capture.torch_compat import export as compat
from pt2doctor.model.export import ExportStep
from pt2doctor.model.export_draft import ExportCheck
from pt2doctor.model.serialize import append_line

_MAX_TEXT = 2000


class _Raised:
    def __init__(self, exc: BaseException) -> None:
        self.text = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"


class ExportChecker:
    def __init__(self, log: str, tol: float) -> None:
        self._log = log
        self._tol = tol
        self._programs: dict[str, Any] = {}  # package path -> the exported program compiled into it
        self._loaded: dict[int, Any] = {}  # id(loaded package) -> that program
        self._packages: list[Any] = []  # the loaded packages, kept alive so their ids stay theirs
        self._judged: set[tuple[int, str]] = set()  # (package, the kinds of inputs) already judged

    def before(self, step: ExportStep, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if step is not ExportStep.AOTI_RUN or not args:
            return None
        program = self._loaded.get(id(args[0]))
        key = (id(args[0]), _input_kinds(args[1:], kwargs))
        if program is None or key in self._judged:
            return None
        self._judged.add(key)
        try:
            return _run(program.module(), args[1:], kwargs)
        except Exception as exc:  # the program could not even be unlifted: nothing to judge against
            return _Raised(exc)

    def after(self, step: ExportStep, index: int, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any,
              reference: Any) -> None:
        try:
            check = self._after(step, index, args, kwargs, out, reference)
        except Exception as exc:
            check = ExportCheck(index, step, "error", "", detail=f"{type(exc).__name__}: {exc}"[:_MAX_TEXT])
        if check is not None:
            with open(self._log, "a") as handle:
                append_line(handle, check)

    def _after(self, step: ExportStep, index: int, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any,
               reference: Any) -> ExportCheck | None:
        if step is ExportStep.AOTI_COMPILE:
            program = args[0] if args else kwargs.get("exported_program")
            self._programs[_key(out)] = program
        elif step is ExportStep.AOTI_LOAD:
            program = self._programs.get(_key(args[0] if args else kwargs.get("path")))
            if program is not None:
                self._loaded[id(out)] = program
                self._packages.append(out)
        elif step is ExportStep.RUN_DECOMPOSITIONS and args:
            return judge_decomposition(index, args[0], out, self._tol)
        elif step is ExportStep.AOTI_RUN and reference is not None:
            return judge_package(index, reference, out, self._tol)
        return None


def judge_decomposition(index: int, program: Any, decomposed: Any, tol: float) -> ExportCheck:
    step, against = ExportStep.RUN_DECOMPOSITIONS, "the exported program it decomposed"
    before, after = compat.program_interface(program), compat.program_interface(decomposed)
    if before != after:
        return ExportCheck(index, step, "fail", against, "its example inputs", _interface_change(before, after))
    example = program.example_inputs
    if example is None:
        return ExportCheck(index, step, "pass", against, detail="the same interface; no example inputs to run")
    args, kwargs = example
    expected = _run(program.module(), args, kwargs)
    actual = _run(decomposed.module(), args, kwargs)
    return _verdict(index, step, against, "its example inputs", expected, actual, tol)


def judge_package(index: int, reference: Any, out: Any, tol: float) -> ExportCheck:
    step, against = ExportStep.AOTI_RUN, "the exported program run eagerly (ep.module())"
    inputs = "the inputs of the package's first call"
    if isinstance(reference, _Raised):
        shapes = [tuple(t.shape) for t in _tensors(out)]
        return ExportCheck(index, step, "fail", against, inputs,
                           f"the exported program rejects these inputs ({reference.text[:300]}); the package "
                           f"accepted them and returned tensors of shape {', '.join(map(str, shapes)) or 'none'}",
                           rejected=True)
    return _verdict(index, step, against, inputs, reference, (_tensors(out), []), tol)


def _verdict(index: int, step: ExportStep, against: str, inputs: str, expected: Any, actual: Any,
             tol: float) -> ExportCheck:
    if isinstance(expected, _Raised) or isinstance(actual, _Raised):
        which, raised = ("the reference", expected) if isinstance(expected, _Raised) else ("the result", actual)
        return ExportCheck(index, step, "error", against, inputs, f"{which} raised {raised.text}"[:_MAX_TEXT])
    (want, want_in), (got, got_in) = expected, actual
    outputs = compare(want, got, None, tol)
    mutated = compare(want_in, got_in, None, tol) if got_in else outputs
    if outputs.verdict == "pass" and mutated.verdict == "pass":
        return ExportCheck(index, step, "pass", against, inputs, max_abs_err=outputs.max_abs_err)
    what = "outputs" if outputs.verdict == "fail" else "inputs after the call (mutations)"
    worst = outputs if outputs.verdict == "fail" else mutated
    shapes = f" ({len(want)} tensor(s) expected, {len(got)} returned)" if len(want) != len(got) else ""
    return ExportCheck(index, step, "fail", against, inputs, f"the {what} differ{shapes}: max abs error "
                       f"{worst.max_abs_err}", max_abs_err=worst.max_abs_err)


def _interface_change(before: compat.ProgramInterface, after: compat.ProgramInterface) -> str:
    parts = []
    if before.user_outputs != after.user_outputs:
        parts.append(f"user outputs {before.user_outputs} -> {after.user_outputs}")
    for name, old, new in (("mutated user inputs", before.mutated_inputs, after.mutated_inputs),
                           ("mutated buffers", before.mutated_buffers, after.mutated_buffers)):
        if old != new:
            parts.append(f"{name} {list(old) or 'none'} -> {list(new) or 'none'}")
    return ("the decomposed program declares another interface than the program it came from, for the same "
            "computation: " + "; ".join(parts))


def _run(module: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    """(tensor outputs, the tensor inputs after the call) of `module` on copies, the RNG state kept; or
    `_Raised` when it raises (a guard that rejects the inputs)."""
    leaves, spec = torch_compat.tree_flatten((tuple(args), dict(kwargs or {})))
    with torch_compat.kept_state():
        copies = torch_compat.copy_inputs(leaves)
        call_args, call_kwargs = torch_compat.tree_unflatten(copies, spec)
        try:
            out = module(*call_args, **call_kwargs)
        except Exception as exc:
            return _Raised(exc)
    return _tensors(out), _tensors(copies)


def _input_kinds(args: Any, kwargs: Any) -> str:
    """The shapes and dtypes of a call's tensor inputs: a package is judged once per kind of input."""
    import torch

    return ";".join(f"{tuple(t.shape)}:{t.dtype}" for t in torch_compat.tree_leaves((args, kwargs))
                    if isinstance(t, torch.Tensor))


def _tensors(value: Any) -> list[Any]:
    import torch

    return [t.detach() for t in torch_compat.tree_leaves(value) if isinstance(t, torch.Tensor)]


def _key(path: Any) -> str:
    return os.path.abspath(os.fspath(path)) if isinstance(path, (str, os.PathLike)) else f"id:{id(path)}"

"""The Python API: `minify(gm, inputs, check)` reduces a failing FX graph to a verified repro.

Contract: `check` says how the graph was compiled when it failed: a registered backend name
(`"inductor"`, `"aot_eager"`, `"relu_compile_error_TESTING_ONLY"`, ...), a backend callable (kept
as its source, so the repro and the isolated workers can define it), or a full `ReproContext`.
An aten-level graph (the kind AOTAutograd hands Inductor) with `check="inductor"` is compiled
the after-AOT way (`compile_fx_inner`); any other graph the after-Dynamo way (`torch.compile`).
`inputs` are example values (real or fake tensors, ints) or `TensorSpec`/`ScalarSpec`s. Where
real values matter (an accuracy check, integer tensors such as indices; or `save_values=True`)
they are saved to `repro_inputs.pt` beside the repro (`torch.save`, read back with
`torch.load(weights_only=True)`), and inputs whose shape or dtype the reduction changes, or that
replace cut nodes, are random. The result says whether `python repro.py` was verified in a fresh
interpreter.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.fx

from pt2doctor.capture import torch_compat
from pt2doctor.capture.child.backend_source import callable_backend_spec
from pt2doctor.capture.child.graph_inputs import input_specs
from pt2doctor.model.minify import DEFAULT_TOLERANCE, BackendKind, BackendSpec, InputSpec, ScalarSpec, Stage, TensorSpec
from pt2doctor.model.settings import default_jobs
from pt2doctor.reduce import saved_values
from pt2doctor.reduce.core import ProgressReporter
from pt2doctor.reduce.fx_case import initial_case, make_base
from pt2doctor.reduce.fx_minify import MinifyOptions, MinifyOutcome, minify_case
from pt2doctor.reduce.oracle import ReproContext


def minify(
    gm: torch.fx.GraphModule,
    inputs: Sequence[Any],
    check: str | Callable[..., Any] | ReproContext = "inductor",
    *,
    accuracy: bool = False,
    tolerance: float = DEFAULT_TOLERANCE,
    config_lines: Sequence[str] = (),
    jobs: int | None = None,
    timeout_s: float = 120.0,
    out_dir: Path | str | None = None,
    reporter: ProgressReporter | None = None,
    save_values: bool | None = None,
) -> MinifyOutcome:
    given = [s for s in inputs if isinstance(s, (TensorSpec, ScalarSpec))]
    specs: list[InputSpec] = given if len(given) == len(inputs) else input_specs(gm, inputs)
    context = check if isinstance(check, ReproContext) else _context(gm, check, accuracy, tolerance, config_lines)
    out = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="pt2doctor-minify-"))
    if save_values if save_values is not None else saved_values.values_matter(inputs, context.accuracy):
        specs = saved_values.save_repro_inputs(inputs, specs, out)
    base = make_base(gm, specs)
    if base is None:
        raise ValueError("the graph does not run on inputs with this metadata")
    if context.accuracy:  # cut nodes get the values the graph computes there (the eager reference ran)
        base = saved_values.with_node_values(base, out)
    options = MinifyOptions(out_dir=out, jobs=jobs or default_jobs(), timeout_s=timeout_s)
    return minify_case(initial_case(base), context, options, reporter)


def _context(gm: torch.fx.GraphModule, check: str | Callable[..., Any], accuracy: bool, tolerance: float,
             config_lines: Sequence[str]) -> ReproContext:
    aten = any(torch_compat.is_op_overload(n.target) for n in gm.graph.nodes)
    stage = Stage.AOT if check == "inductor" and aten else Stage.DYNAMO
    backend = BackendSpec(BackendKind.NAMED, check) if isinstance(check, str) else callable_backend_spec(check)
    return ReproContext(stage, backend, tuple(config_lines), accuracy, tolerance, (f"torch {torch.__version__}.",))


__all__ = ["minify", "MinifyOutcome", "ReproContext", "InputSpec"]

"""Minify an AOTInductor failure from the exported program a recorded run kept, with AOTInductor as the oracle.

Contract: `minify_program(kept, options, accuracy=..., reporter=...)` reads what the diagnose child kept
of the first `aoti_compile_and_package` (`model.export.ExportRecording` in `kept`: the exported
program, the compiler config, the `inductor_configs` argument, and the inputs of the package's first
call when it was called) and reduces the program's graph with the FX minifier (`reduce.fx_minify`):
- the graph is `ExportedProgram.graph_module`, every input a placeholder (parameters, buffers and
  constants lifted, then the user's inputs), with the values of that call (else the ones it was
  exported with; else only their metadata): a candidate is a smaller graph on such inputs;
- each candidate is a repro (`reduce.repro`, `Stage.AOTI`) that exports its module again (non-strict),
  compiles it with `aoti_compile_and_package` under the recorded Inductor config and `inductor_configs`,
  loads the package and calls it; it runs in a child forked from a warm worker (`processes.forks`), so a
  candidate whose package crashes kills only its query;
- the failure to keep is the one the whole graph shows in isolation (a lowering or C++ compile error,
  the package's exception or the signal it died of), or, for a wrong result (`accuracy`), the repro's
  accuracy check (the package against eager and its fp64 reference);
- `repro.py` (plain torch; `repro_inputs.pt` beside it where values matter) is verified in a fresh
  interpreter, and the result (`MinifyResult`, stage `aoti`) names the ops that remain.
Raises `CannotReproduce` when the whole graph does not fail in isolation, `ValueError` when nothing
usable was kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from pt2doctor.capture import torch_compat
from pt2doctor.capture.child.graph_inputs import input_specs
from pt2doctor.model.export import ExportRecording
from pt2doctor.model.minify import BackendKind, BackendSpec, InputSpec, Stage
from pt2doctor.model.serialize import read_record
from pt2doctor.reduce import saved_values
from pt2doctor.reduce.core import ProgressReporter
from pt2doctor.reduce.fx_case import FxCase, initial_case, make_base
from pt2doctor.reduce.fx_minify import MinifyOptions, MinifyOutcome, minify_case
from pt2doctor.reduce.oracle import ReproContext


def minify_program(kept: Path, options: MinifyOptions, *, accuracy: bool = False,
                   reporter: ProgressReporter | None = None) -> MinifyOutcome:
    recording = read_record(kept / "recording.json", ExportRecording)
    if recording.error:
        raise ValueError(recording.error)
    program = torch.export.load(str(kept / recording.program))
    case = program_case(program, _call(program, kept / recording.inputs), accuracy, options.out_dir)
    return minify_case(case, aoti_context(recording, accuracy), options, reporter)


def aoti_context(recording: ExportRecording, accuracy: bool) -> ReproContext:
    header = (f"torch {torch.__version__}.",
              "An exported program's graph, reduced: exported again and compiled with AOTInductor, it fails.")
    return ReproContext(Stage.AOTI, _NO_BACKEND, recording.inductor_config_lines(), accuracy, header=header,
                        inductor_configs=recording.inductor_configs)


def program_case(program: Any, call: tuple[tuple[Any, ...], dict[str, Any]] | None, accuracy: bool,
                 out_dir: Path) -> FxCase:
    """The exported program's graph as the minifier's first case: real input values where the call is known
    (saved beside the repro where they matter), else each placeholder's recorded metadata."""
    gm = program.graph_module
    if call is None:
        values: list[Any] = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    else:
        values = torch_compat.program_inputs(program, *call)
    specs: list[InputSpec] = input_specs(gm, values)
    if call is not None and saved_values.values_matter(values, accuracy):
        specs = saved_values.save_repro_inputs(values, specs, out_dir)
    base = make_base(gm, specs)
    if base is None:
        raise ValueError("the exported program's graph does not run on its recorded inputs")
    return initial_case(base)


def _call(program: Any, inputs: Path) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """The package's first call, when it was called; else the call the program was exported with."""
    if inputs.exists():
        args, kwargs = torch.load(inputs, weights_only=False)
        return tuple(args), dict(kwargs)
    return torch_compat.example_call(program)


# A Stage.AOTI repro compiles with AOTInductor, never through a backend: Inductor names the compiler.
_NO_BACKEND = BackendSpec(BackendKind.NAMED, "inductor")

"""Keep what a repro of an AOTInductor failure needs, in a recorded run of the diagnose child.

Contract: `ExportRecorder(record_dir)` is handed to the export observer (`export_observer`), which
calls `before(step, args, kwargs)` before a step runs, so whatever kills the process comes after what
was kept. Before the first `aoti_compile_and_package`: the exported program (`torch.export.save`) to
`program.pt2`, the non-default compiler config as code lines and the `inductor_configs` argument, in
`recording.json` (`model.export.ExportRecording`), all in `<record_dir>/export/`. Before the package's
first call: its (args, kwargs) to `inputs.pt` (`torch.save`). Only the first of each is kept; keeping
is best effort (what cannot be saved is named in `error`) and never changes what the script computes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pt2doctor.capture import torch_compat
from pt2doctor.model.export import RECORDING_DIR, ExportRecording, ExportStep
from pt2doctor.model.serialize import write_record


class ExportRecorder:
    def __init__(self, record_dir: str) -> None:
        self._dir = Path(record_dir) / RECORDING_DIR
        self._kept: set[ExportStep] = set()

    def before(self, step: ExportStep, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if step in self._kept or step not in (ExportStep.AOTI_COMPILE, ExportStep.AOTI_RUN):
            return
        self._kept.add(step)
        self._dir.mkdir(parents=True, exist_ok=True)
        if step is ExportStep.AOTI_COMPILE:
            self._program(args[0] if args else kwargs.get("exported_program"), kwargs.get("inductor_configs"))
        else:
            self._inputs(args[1:], kwargs)  # args[0]: the package itself

    def _program(self, exported_program: Any, inductor_configs: Any) -> None:
        import torch

        error = ""
        try:
            torch.export.save(exported_program, str(self._dir / "program.pt2"))
        except Exception as exc:  # a program torch cannot serialize: no repro, the diagnosis goes on
            error = f"the exported program could not be saved: {type(exc).__name__}: {exc}"
        record = ExportRecording(program="program.pt2", inputs="inputs.pt",
                                 config_lines=torch_compat.config_lines(), inductor_configs=repr(inductor_configs),
                                 error=error)
        write_record(self._dir / "recording.json", record)

    def _inputs(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        import torch

        try:
            torch.save((args, kwargs), str(self._dir / "inputs.pt"))
        except Exception:  # inputs torch cannot pickle: the repro compiles and loads, without the call
            (self._dir / "inputs.pt").unlink(missing_ok=True)

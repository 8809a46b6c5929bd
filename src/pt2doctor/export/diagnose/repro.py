"""A standalone repro of an AOTInductor failure: the recorded exported program, compiled, loaded and run.

Contract: `export_repro(run_dir, out_dir, step, error, timeout_s)` reads what the recorded run kept
(`model.export.ExportRecording`, `export.capture.record`), copies `program.pt2` (and `inputs.pt`
when the package was called) next to `out_dir/repro.py`, writes the repro (the compiler config the
script had set, `aoti_compile_and_package` with the same `inductor_configs`, `aoti_load_package`, and
the package's result checked against the exported program run eagerly, `ep.module()`) and runs it in a
fresh interpreter. It is verified when it fails as the script did: with the same exception type (the
step's), or by dying of a signal when the script's process did. Returns (path, verified, why), path None
when nothing was recorded. Nothing is minified: the repro is the whole exported program.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from pt2doctor.model.export import RECORDING_DIR, ExportEvent, ExportRecording, Phase
from pt2doctor.model.serialize import RecordError, read_record
from pt2doctor.processes.fresh import run_file

_TEMPLATE = '''"""AOTInductor fails on a program exported with torch.export (written by pt2doctor diagnose).

Needs {files} beside it: the exported program (torch.export.save) and the inputs of its first call.
"""
import os

import torch
{config}

HERE = os.path.dirname(os.path.abspath(__file__))
ep = torch.export.load(os.path.join(HERE, "{program}"))
path = torch._inductor.aoti_compile_and_package(ep, inductor_configs={inductor_configs})
package = torch._inductor.aoti_load_package(path)
{run}'''

_RUN = '''args, kwargs = torch.load(os.path.join(HERE, "{inputs}"), weights_only=False)
expected = ep.module()(*args, **kwargs)
torch.testing.assert_close(package(*args, **kwargs), expected)
print("the package matches the exported program run eagerly")
'''


def render_repro(recording: ExportRecording, with_inputs: bool) -> str:
    files = f"{recording.program} and {recording.inputs}" if with_inputs else recording.program
    config = "\n".join(recording.inductor_config_lines())
    return _TEMPLATE.format(files=files, config=config, program=recording.program,
                            inductor_configs=recording.inductor_configs,
                            run=_RUN.format(inputs=recording.inputs) if with_inputs else "")


def export_repro(run_dir: Path, out_dir: Path, failed: ExportEvent | None,
                 timeout_s: float) -> tuple[Path | None, bool, str]:
    kept = run_dir / RECORDING_DIR
    try:
        recording = read_record(kept / "recording.json", ExportRecording)
    except (OSError, RecordError) as exc:
        return None, False, f"no recording of the AOTInductor compile ({type(exc).__name__})"
    if recording.error:
        return None, False, recording.error
    with_inputs = (kept / recording.inputs).exists()
    for name in (recording.program, recording.inputs) if with_inputs else (recording.program,):
        shutil.copyfile(kept / name, out_dir / name)
    repro = out_dir / "repro.py"
    repro.write_text(render_repro(recording, with_inputs))
    proc = run_file(repro, timeout_s)
    if proc.returncode is None:
        return repro, False, f"repro.py did not finish in {timeout_s:.0f} s"
    if failed is not None and failed.phase is Phase.STARTED:
        return repro, proc.returncode < 0, f"repro.py exited {proc.returncode} (the script's process died)"
    expected = failed.error_type.rsplit(".", 1)[-1] if failed is not None else "AssertionError"
    same = proc.returncode != 0 and expected in proc.stderr
    return repro, same, f"repro.py exited {proc.returncode}; {expected} {'in' if same else 'not in'} its error"

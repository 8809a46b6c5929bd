"""Run a script with every compiled graph recorded, and nothing else: the minifier's input without a session.

Contract: `record_script(script, run_dir, ...)` below; the recording itself is `capture.child.graph_recorder`'s.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pt2doctor.model.child import ChildSpec, Hooks
from pt2doctor.model.serialize import write_record
from pt2doctor.processes import launch


def record_script(script: Path, run_dir: Path, *, timeout_s: float = 600.0, argv: list[str] | None = None,
                  accuracy_tolerance: float | None = None, env: dict[str, str] | None = None,
                  run_eagerly: tuple[str, ...] = ()) -> int | None:
    """Run `script` in a child interpreter (`capture.child`) with the recorder on and every after-AOT
    graph recorded (a failure workflow: `minify --script`, the tests); returns its exit status (None: it was
    killed, with everything it started, at `timeout_s`).

    A stand-in for `capture.runner.run_script(..., record_graphs=True)` with no trace and no session,
    so `minify --script` and the tests need no other part of the capture layer. `env` is added to the
    child's environment (`diagnose --function`); its output is kept as `output.txt` in `run_dir`. The
    Dynamo graphs of the compile ids in `run_eagerly` run as captured, without their backend.
    """
    run_dir = Path(run_dir).absolute()
    run_dir.mkdir(parents=True, exist_ok=True)
    spec = ChildSpec(record_dir=str(run_dir), hooks=Hooks(record_every_aot_graph=True, record_run_eagerly=run_eagerly,
                                                          record_accuracy_tolerance=accuracy_tolerance))
    write_record(run_dir / "child-spec.json", spec)
    ran = launch.run(
        [sys.executable, "-m", "pt2doctor.capture.child", "--spec", str(run_dir / "child-spec.json"),
         # it runs in the script's folder: a relative path would not resolve
         str(Path(script).resolve()), *(argv or [])],
        cwd=Path(script).resolve().parent, merge_output=True, timeout_s=timeout_s, env={**os.environ, **(env or {})},
    )
    (run_dir / "output.txt").write_text(ran.stdout)
    return ran.returncode

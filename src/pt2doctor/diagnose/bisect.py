"""Name the Inductor pass or lowering at fault: `CompilerBisector` on the minimal repro, isolated.

Contract: `bisect_repro(repro, target, out_dir, backend=..., jobs=...)` never raises; it returns a `Bisection`
whose `note` says why there is no answer (no bisector in this torch, a timeout, a crash). It runs
`diagnose.bisect_child` in a fresh interpreter (so the bisector's global state cannot leak into
anything else, pytorch#143453) on the minimal repro rather than on the user's script: a query then
costs one small compile instead of a whole program run. The child's log is `out_dir/bisect.log`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pt2doctor.model.diagnosis import Bisection

SUBSYSTEM_TITLES = {
    "pre_grad_passes": "pre-grad FX passes",
    "joint_graph_passes": "joint-graph passes",
    "post_grad_passes": "post-grad passes",
    "lowerings": "a lowering (aten op -> Inductor IR)",
    "decomposition": "a decomposition",
    "cudagraphs": "CUDA graphs",
    "inductor_fallback_random": "random-number codegen (fallback_random fixes it)",
    "inductor_emulate_precision_casts": "precision casts (emulate_precision_casts fixes it)",
    "inductor_layout_optimization": "layout optimization",
    "inductor_comprehensive_padding": "comprehensive padding",
    "aot_eager_decomp_partition_cse": "CSE in the partitioner",
}


def bisect_repro(repro: Path, target: str, out_dir: Path, *, backend: str = "inductor", jobs: int = 2,
                 timeout_s: float = 600.0) -> Bisection:
    out_dir.mkdir(parents=True, exist_ok=True)
    result_path = out_dir / "bisect.json"
    result_path.unlink(missing_ok=True)
    src = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p))
    command = [sys.executable, "-m", "pt2doctor.diagnose.bisect_child", str(repro), target, str(result_path),
               backend, str(jobs)]
    with open(out_dir / "bisect.log", "wb") as log:
        try:
            proc = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=timeout_s,
                                  cwd=repro.parent, start_new_session=True)
        except subprocess.TimeoutExpired:
            return Bisection(None, None, note=f"bisection stopped after {timeout_s:.0f}s")
    if not result_path.exists():
        return Bisection(None, None, note=f"the bisection process died (exit {proc.returncode}); see bisect.log")
    data = json.loads(result_path.read_text())
    return Bisection(data["backend"], data["subsystem"], data["bisect_number"], data["debug_info"],
                     int(data["queries"]), float(data["time_s"]), data["note"])


def describe(bisection: Bisection) -> str:
    if bisection.backend is None:
        return bisection.note or "no bisection"
    if bisection.subsystem is None:
        return f"{bisection.backend} as a whole (no pass or lowering isolates it: code generation)"
    title = SUBSYSTEM_TITLES.get(bisection.subsystem, bisection.subsystem)
    where = f", application #{bisection.bisect_number}" if bisection.bisect_number else ""
    info = f": {bisection.debug_info}" if bisection.debug_info and bisection.debug_info != bisection.subsystem else ""
    return f"{bisection.backend} / {title}{where}{info}"

"""The processes a minification needs, started before anything else so their start-up overlaps the work.

Contract: `start_workers(jobs, timeout_s, out_dir)` starts the fresh interpreter that will verify
the final `repro.py` (`processes.fresh`) and the warm candidate pool (`processes.pool`), and returns
them as `Workers`; `close()` ends both. Neither needs the graph, so the CLI starts them before it
loads the recorded graph: the zygote's Inductor warm-up and the verifier's `import torch` run
while the parent loads. Called before torch is imported (the CLI), it imports torch and Dynamo
itself (the parent needs both to load a graph) and then forks the zygote from this process, so the
zygote does not import them a second time; on a machine of a few busy cores that CPU time is wall
time. Called once torch is in use (`reduce.api`, a caller that already ran things), it starts the
zygote as a new interpreter instead: forking a process with threads or a CUDA context is unsafe.
Where the machine shows a GPU, candidates run in warm servers (`processes.zygote`), and their zygote
is started at once as a new interpreter that never imports torch, so the servers' warm-up (torch,
CUDA, Triton: the critical path there) starts before the parent's own `import torch`.
`PT2DOCTOR_MINIFY_SERVERS=1` (`model.settings`) asks for servers anyway (where forking misbehaves; the tests).
With `fresh_forks` (a diagnosis, no GPU visible) the zygote is forked from the fresh-forks server once its imports are
done (`WorkerPool`'s `host`): one interpreter's import of torch and Inductor, and its CPU probe, serve both, and the
repro's verification runs are forked there too (no verifier interpreter: `verifier` None).
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from pt2doctor.capture import torch_compat
from pt2doctor.model.settings import settings
from pt2doctor.processes.fresh import FreshInterpreter
from pt2doctor.processes.fresh_forks import FreshForks
from pt2doctor.processes.pool import WorkerPool
from pt2doctor.processes.servers import gpu_device_visible


@dataclass(frozen=True, slots=True)
class Workers:
    pool: WorkerPool
    verifier: FreshInterpreter | None
    forks: FreshForks | None = None  # fresh runs forked after `import torch` (no GPU visible: `processes.fresh_forks`)

    def close(self) -> None:
        self.pool.close()
        if self.verifier is not None:
            self.verifier.close()
        if self.forks is not None:
            self.forks.close()

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_workers(jobs: int, timeout_s: float, out_dir: Path, *, verify: bool = True,
                  fork: bool | None = None, fresh_forks: bool = False) -> Workers:
    """`fork=False`: never fork the zygote from this process (which would import torch here first, before anything
    else can start: `diagnose` starts its first run of the script beside the workers' warm-up instead);
    `fresh_forks`: also the server whose forks verify what is handed over (`processes.fresh_forks`), where no GPU is
    visible: then every verification run is forked there (no `verifier` interpreter; one is started where the server
    cannot run a file)."""
    servers = gpu_device_visible() or settings().minify_servers
    fork = fork is not False and not servers and "torch" not in sys.modules and threading.active_count() == 1
    if fork:
        torch_compat.import_dynamo()  # the parent needs it anyway; the forked zygote inherits it
    # the fork server's imports are the zygote's, forked there (`WorkerPool`'s `host`), at low priority: beside
    # diagnose's first run they take what it leaves idle (ResNet: the run 5.5-6.0 s, the verdict 8.1-8.7 s, against
    # 6.3-7.0 and 8.8-9.5 at normal priority, alternating), and they are done about when it ends
    forks = FreshForks(Path(out_dir) / "fresh") if fresh_forks and not servers else None
    # where the fork server verifies, no interpreter of its own does: its `import torch` beside the program's first run
    # took the run's CPU (ResNet's diagnosis 21.7-24.4 s with it, 20.6-21.3 s without, three each)
    verifier = FreshInterpreter(out_dir) if verify and forks is None else None
    pool = WorkerPool(jobs, timeout_s, fork=fork, servers=servers, on_ready=verifier.prewarm if verifier else None,
                      repro_file=str((Path(out_dir) / "repro.py").resolve()), host=None if fork else forks)
    return Workers(pool, verifier, forks)

"""Name the Inductor pass or lowering at fault: `CompilerBisector` on the minimal repro, isolated.

Contract: `bisect_repro(repro, target, out_dir, backend=..., jobs=...)` never raises (nor does
`PendingBisection(out_dir, cuda=...).run(...)`, the same started before the repro exists); it returns a `Bisection`
whose `note` says why there is no answer (no bisector in this torch, a timeout, a crash). It runs
`bisect.child` in a fresh interpreter (so the bisector's global state cannot leak into
anything else, pytorch#143453) on the minimal repro rather than on the user's script: a query then
costs one small compile instead of a whole program run. The child's log is `out_dir/bisect.log`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from pt2doctor.capture.bytecode_cache import worker_env
from pt2doctor.capture.runner import with_package_path
from pt2doctor.model.diagnosis import Bisection, BisectJob
from pt2doctor.model.serialize import RecordError, dumps, read_record
from pt2doctor.model.settings import default_jobs
from pt2doctor.processes import group as process_group
from pt2doctor.processes import launch

if TYPE_CHECKING:
    from pt2doctor.processes.fresh_forks import FreshForks


class PendingBisection:
    """A bisection process started early (`start()`, at once unless `deferred`): it imports torch and warms Inductor
    up while the minifier works, then takes its job (`run`, which starts it if nothing did) or is dismissed
    (`cancel`). `cuda` (the recorded inputs were on a GPU) skips the warm-up, which would leave the forked queries
    unable to use CUDA. `deferred`: started by the caller when the machine can spare it (the diagnosis starts it once
    its verdict is said: on a few cores its seconds of warm-up slowed the stage ladder, GPT-2's verdict among it).
    `forks` (a fresh-forks server, no GPU visible): the process is forked there, where torch and Inductor are imported
    and the CPU probed already (GPT-2: 7.8 CPU-s of a new interpreter's warm-up), else it starts as a new one."""

    def __init__(self, out_dir: Path, *, cuda: bool, deferred: bool = False, forks: FreshForks | None = None) -> None:
        self.out_dir = out_dir
        self._cuda = cuda
        self._forks = forks if not cuda else None
        self._proc: launch.Stoppable | None = None
        self._job_in: BinaryIO | None = None  # the process's stdin: its job, one line
        if not deferred:
            self.start()

    def start(self) -> None:
        if self._proc is not None:
            return
        self.out_dir.mkdir(parents=True, exist_ok=True)
        log, env = self.out_dir / "bisect.log", with_package_path(worker_env())
        argv = ["pt2doctor.bisect.child", "--serve", "1" if self._cuda else "0"]
        theirs, ours = os.pipe()
        try:
            if self._forks is not None:
                self._proc = self._forks.start_module(argv[0], argv[1:], env=env, cwd=Path.cwd(), out=log, err=log,
                                                      stdin=theirs)
            if self._proc is None:
                with open(log, "wb") as output:
                    self._proc = launch.start([sys.executable, "-m", *argv], stdin=theirs, stdout=output,
                                              stderr=subprocess.STDOUT, env=env)
        finally:
            os.close(theirs)
        self._job_in = os.fdopen(ours, "wb")

    def run(self, repro: Path, target: str, *, backend: str = "inductor", jobs: int | None = None,
            timeout_s: float = 600.0) -> Bisection:
        self.start()
        assert self._proc is not None and self._job_in is not None
        result_path = self.out_dir / "bisect.json"
        result_path.unlink(missing_ok=True)
        job = BisectJob(str(repro), target, str(result_path), backend, jobs or default_jobs())
        try:
            with self._job_in:
                self._job_in.write(dumps(job) + b"\n")
            self._proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.cancel()
            return Bisection(None, None, note=f"bisection stopped after {timeout_s:.0f}s")
        except (BrokenPipeError, OSError):
            self._proc.wait()
        try:
            return read_record(result_path, Bisection)
        except (OSError, RecordError):
            return Bisection(None, None, note=f"the bisection process died (exit {self._proc.returncode}); "
                                              "see bisect.log")

    def cancel(self) -> None:
        if self._proc is None:
            return
        if self._proc.returncode is None:
            process_group.kill_group(self._proc.pid)
        self._proc.wait()
        if self._job_in is not None:
            with suppress(OSError):
                self._job_in.close()


def bisect_repro(repro: Path, target: str, out_dir: Path, *, backend: str = "inductor", jobs: int | None = None,
                 timeout_s: float = 600.0) -> Bisection:
    cuda = "'cuda" in repro.read_text()
    return PendingBisection(out_dir, cuda=cuda).run(repro, target, backend=backend, jobs=jobs, timeout_s=timeout_s)

"""The parent side of the worker pool: send candidate scripts to the zygote, collect results.

Contract: `WorkerPool.run(scripts)` returns one `RunResult` per script, in the order given,
whatever order the forked children finish in. The zygote (`reduce.zygote`) is started at
construction and warms up while the caller prepares its first batch; `run` waits for it. The
pool is a context manager; closing it (or Ctrl-C, or the parent dying) ends the zygote and its
children.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pt2doctor.reduce.zygote import FrameReader, send

Status = Literal["ok", "failed", "signal", "timeout", "error"]


@dataclass(frozen=True, slots=True)
class RunResult:
    status: Status
    text: str = ""


class WorkerPoolError(RuntimeError):
    pass


class WorkerPool:
    def __init__(self, jobs: int, timeout_s: float, *, env: dict[str, str] | None = None) -> None:
        self.jobs = max(1, jobs)
        self.timeout_s = timeout_s
        debug = bool(os.environ.get("PT2DOCTOR_MINIFY_DEBUG"))
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "pt2doctor.reduce.zygote", str(self.jobs)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=None if debug else subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
        )
        self._reader = FrameReader()
        self._inbox: list[object] = []
        self._ready = False
        self._next_id = 0
        self.warm_up_s = 0.0

    def _receive(self) -> object:
        while not self._inbox:
            data = os.read(self._proc.stdout.fileno(), 1 << 20)  # type: ignore[union-attr]
            if not data:
                raise WorkerPoolError(f"worker exited with status {self._proc.wait()}")
            self._inbox.extend(self._reader.feed(data))
        return self._inbox.pop(0)

    def wait_ready(self) -> None:
        if not self._ready:
            started = time.monotonic()
            if self._receive() != ("ready",):
                raise WorkerPoolError("worker did not start")
            self._ready = True
            self.warm_up_s = time.monotonic() - started

    def run(self, scripts: Sequence[str]) -> list[RunResult]:
        self.wait_ready()
        ids = list(range(self._next_id, self._next_id + len(scripts)))
        self._next_id += len(scripts)
        for job_id, text in zip(ids, scripts):
            send(self._proc.stdin.fileno(), ("run", job_id, text, self.timeout_s))  # type: ignore[union-attr]
        results: dict[int, RunResult] = {}
        while len(results) < len(ids):
            job_id, status, text = self._receive()  # type: ignore[misc]
            results[job_id] = RunResult(status, text)
        return [results[i] for i in ids]

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                send(self._proc.stdin.fileno(), ("quit",))  # type: ignore[union-attr]
                self._proc.stdin.close()  # type: ignore[union-attr]
                self._proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

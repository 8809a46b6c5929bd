"""Fresh runs of a file without a fresh interpreter's start: forked from one that has imported torch and nothing else.

Contract: `FreshForks(cwd)` starts a server at once (`python -c`, pt2doctor's worker environment), which imports
exactly what a fresh interpreter verifying a repro imports before the script (`processes.fresh`: torch, Dynamo, FX,
then Inductor with the CPU probe, a cached fact about the machine; autotuning anew, as there) at low priority, then
forks one child per run.
`run(path, timeout_s, env=None) -> Ran | None` runs `path` as `python path` would run it after those imports: as
`__main__`, from its folder, `sys.argv` its name, `sys.path[0]` its folder, in a process group of its own, its
stdout and stderr to files, the environment `env` where given (what torch read on import is the server's: only
variables a script reads as it runs differ, such as CI's for `run_tests()`), an uncaught exception printed and exit
1, `sys.exit(N)` exit N, a signal its death, at the timeout the group killed (`Ran.returncode` None). Several runs
may go at once, from several threads. None when the server cannot run it (it died, or never became ready): the
caller starts a fresh interpreter instead. `close()` ends the server and every child still running.

Why: on a few cores, a fresh interpreter's `import torch` (seconds of CPU) is most of what verifying a repro costs,
and a diagnosis verifies repro.py, its short form both ways and its regression test both ways. A child forked after
the imports starts from the state the fresh interpreter reaches after them (nothing of pt2doctor, nothing of any
candidate, nothing compiled, no thread: the probe's threads have ended), the state `python repro.py` is in after its
import lines. Not where a GPU is visible: a process that asked CUDA anything cannot fork children that use it
(`processes.workers` decides).
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
from concurrent.futures import Future
from contextlib import suppress
from pathlib import Path

from pt2doctor.capture.bytecode_cache import worker_env
from pt2doctor.capture.torch_compat import autotune_anew_source, prewarm_inductor_source
from pt2doctor.processes import launch
from pt2doctor.processes.launch import Ran

_SERVER = """\
import json, os, runpy, select, signal, sys, traceback
os.nice(10)
import torch
import torch._dynamo
import torch.fx
{prewarm}
{autotune_anew}
try:
    os.setpriority(os.PRIO_PROCESS, 0, 0)
except OSError:
    pass


def say(message):
    os.write(1, (json.dumps(message) + "\\n").encode())


def child(job):
    code = 2
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.setpgid(0, 0)
        for fd, name, flags in ((0, os.devnull, os.O_RDONLY), (1, job["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                (2, job["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
            os.dup2(os.open(name, flags, 0o644), fd)
        if job["env"] is not None:
            os.environ.clear()
            os.environ.update(job["env"])
        path = job["path"]
        os.chdir(os.path.dirname(path))
        sys.argv = [os.path.basename(path)]
        sys.path[0] = os.path.dirname(path)
        code = 0
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as exit:
            code = exit.code or 0
            if not isinstance(code, int):
                print(code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


say({{"ready": True}})
children, pending = {{}}, b""


def stopped(signum, frame):  # the diagnosis is stopping: its children (each its own group) end with the server
    for pid in list(children):
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    os._exit(128 + signum)


signal.signal(signal.SIGTERM, stopped)
while True:
    readable, _, _ = select.select([0], [], [], 0.02)
    if readable:
        data = os.read(0, 1 << 16)
        if not data:
            break
        pending += data
        while b"\\n" in pending:
            line, pending = pending.split(b"\\n", 1)
            job = json.loads(line)
            pid = os.fork()
            if pid == 0:
                child(job)
            children[pid] = job["id"]
            say({{"id": job["id"], "pid": pid}})
    while children:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if not pid:
            break
        say({{"id": children.pop(pid), "code": os.waitstatus_to_exitcode(status)}})
for pid in children:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
"""

_READY_S = 300.0  # the server's imports, at low priority on a busy machine


@functools.cache
def _server_source() -> str:
    return _SERVER.format(prewarm=prewarm_inductor_source(), autotune_anew=autotune_anew_source())


class FreshForks:
    def __init__(self, cwd: Path) -> None:
        self.cwd = Path(cwd)
        self.cwd.mkdir(parents=True, exist_ok=True)
        self._proc: subprocess.Popen[bytes] | None = launch.start(
            [sys.executable, "-c", _server_source()], cwd=self.cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env=worker_env())
        self._ready = threading.Event()
        self._pids: dict[int, Future[int]] = {}
        self._codes: dict[int, Future[int]] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._live: set[int] = set()  # the children running now (each leads its own group)
        threading.Thread(target=self._read, daemon=True, name="pt2doctor-fresh-forks").start()

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            message = json.loads(line)
            if message.get("ready"):
                self._ready.set()
            elif "pid" in message:
                self._live.add(message["pid"])
                self._pids[message["id"]].set_result(message["pid"])
            else:
                self._live.discard(self._pids[message["id"]].result())
                self._codes[message["id"]].set_result(message["code"])
        self._ready.set()  # the server ended: whoever waits learns it below
        for future in (*self._pids.values(), *self._codes.values()):
            if not future.done():
                future.set_exception(EOFError("the fresh-forks server ended"))

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def run(self, path: Path, timeout_s: float, env: dict[str, str] | None = None) -> Ran | None:
        if not self._ready.wait(_READY_S) or not self.alive:
            return None
        path = Path(path).resolve()
        job = next(self._ids)
        out, err = self.cwd / f".fork-{job}.out", self.cwd / f".fork-{job}.err"
        self._pids[job], self._codes[job] = Future(), Future()
        request = {"id": job, "path": str(path), "out": str(out), "err": str(err), "env": env}
        try:
            with self._lock:
                assert self._proc is not None and self._proc.stdin is not None
                self._proc.stdin.write((json.dumps(request) + "\n").encode())
                self._proc.stdin.flush()
            pid = self._pids[job].result(timeout=60)
            try:
                code: int | None = self._codes[job].result(timeout=timeout_s)
            except TimeoutError:
                with suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
                self._codes[job].result()
                code = None
        except (OSError, EOFError, TimeoutError):
            return None
        finally:
            self._pids.pop(job, None)
            self._codes.pop(job, None)
        try:
            return Ran(code, out.read_text(errors="replace"), err.read_text(errors="replace"))
        finally:
            out.unlink(missing_ok=True)
            err.unlink(missing_ok=True)

    def close(self) -> None:
        """The server kills its children once its stdin closes; what it could not (it was killed) is killed here."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with suppress(OSError):
            proc.stdin.close()  # type: ignore[union-attr]
        try:
            proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            launch.stop(proc, signal.SIGKILL, grace_s=1.0)
        for pid in list(self._live):
            with suppress(OSError):
                os.killpg(pid, signal.SIGKILL)

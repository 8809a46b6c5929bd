"""Fresh runs of a file without a fresh interpreter's start: forked from one that has imported torch and nothing else.

Contract: `FreshForks(cwd, urgent=False)` starts a server at once (`python -c`, pt2doctor's worker environment), which
imports exactly what a fresh interpreter verifying a repro imports before the script (`processes.fresh`: torch,
Dynamo, FX, then Inductor with the CPU probe, a cached fact about the machine; autotuning anew, as there) at low
priority (`urgent`: at normal priority, where what it forks first is awaited soon), then forks one child per request;
the requests come on a socket of their own, each with the descriptors it hands over (SCM_RIGHTS).
`run(path, timeout_s, env=None) -> Ran | None` runs `path` as `python path` would run it after those imports: as
`__main__`, from its folder, `sys.argv` its name, `sys.path[0]` its folder, in a process group of its own, its
stdout and stderr to files, the environment `env` where given (what torch read on import is the server's: only
variables a script reads as it runs differ, such as CI's for `run_tests()`), an uncaught exception printed and exit
1, `sys.exit(N)` exit N, a signal its death, at the timeout the group killed (`Ran.returncode` None). Several runs
may go at once, from several threads. None when the server cannot run it (it died, or never became ready): the
caller starts a fresh interpreter instead. `close()` ends the server and every child still running.
`start_module(module, args, env=, cwd=, out=, err=, stdin=, stdout=) -> ForkedProcess | None` starts `python -m MODULE
ARGS` there (a whole-program run of diagnose: `capture.runner`, `diagnose.runs.Forking`; pt2doctor's own warm processes,
the worker pool's zygote and the bisector, which then import neither torch nor Inductor, nor probe the CPU, again:
`processes.pool`, `bisect.driver`), its standard streams files or descriptors of the caller's (a pipe's ends), and
returns at once with a process to wait for, as `subprocess.Popen` would; where `forks_for(env)` says the program
starts there as in a new interpreter: its
environment differs from the server's only in what the fork sets up again from it (`REDONE`: the import path,
bytecode's place, torch's logging and structured trace) and in the compile caches' folders, which torch reads as it
compiles. The fork also seeds Python's `random` (and numpy's, if imported) anew, as an interpreter's start does, and
ends the way the interpreter would (atexit handlers, non-daemon threads joined). What no fork can redo: the hash seed
of `str` (the server's, the same in every fork) and module state the imports left (the modules themselves, the CPU
probe's answer).

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
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from contextlib import suppress
from pathlib import Path
from typing import Any

from pt2doctor.capture.bytecode_cache import worker_env
from pt2doctor.capture.torch_compat import autotune_anew_source, logs_from_env_source, prewarm_inductor_source
from pt2doctor.processes import launch
from pt2doctor.processes.group import BACKGROUND_NICE, set_priority_source
from pt2doctor.processes.launch import COMPILE_CACHE_VARS, Ran

_SERVER = """\
import json, os, random, runpy, select, signal, socket, sys, traceback
{set_priority}
set_priority({nice})
import torch
import torch._dynamo
import torch.fx
{prewarm}
{autotune_anew}
set_priority(0)
control = socket.socket(fileno=0)  # one request a packet, with the descriptors it hands over


def say(message):
    os.write(1, (json.dumps(message) + "\\n").encode())


def child(job, given):
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.setsid()  # a session (and so an autogroup) of its own, as every child started anew gets
        given = dict(zip(job["fds"], given))  # the descriptors the request handed over, by the one each becomes
        for fd, name, flags in ((0, os.devnull, os.O_RDONLY), (1, job["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                (2, job["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
            if fd in given:
                os.dup2(given.pop(fd), fd)
            elif fd == 2 and name == job["out"] and 1 not in job["fds"]:
                os.dup2(1, 2)  # one file for both: one descriptor, as `2>&1` makes
            else:
                os.dup2(os.open(name, flags, 0o644), fd)
    except BaseException:
        os._exit(2)
    if job.get("module"):
        program(job)
        sys.exit(0)  # the module returned: the ordinary end of an interpreter (atexit, threads joined)
    os._exit(run_file(job))


def run_file(job):
    try:
        if job["env"] is not None:
            os.environ.clear()
            os.environ.update(job["env"])
        path = job["path"]
        os.chdir(os.path.dirname(path))
        sys.argv = [os.path.basename(path)]
        sys.path[0] = os.path.dirname(path)
    except BaseException:
        return 2
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
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    return code


def entries(pythonpath):
    return [os.path.abspath(p) for p in (pythonpath or "").split(os.pathsep) if p]


SERVER_ENTRIES = entries(os.environ.get("PYTHONPATH"))
{logs_from_env}


def program(job):
    # `python -m MODULE ARGS` from here: what the interpreter's start reads from the environment is done again with
    # the job's; its SystemExit (and anything uncaught) ends this process the way it ends that interpreter
    env = job["env"]
    os.environ.clear()
    os.environ.update(env)
    sys.pycache_prefix = env.get("PYTHONPYCACHEPREFIX") or None
    sys.dont_write_bytecode = bool(env.get("PYTHONDONTWRITEBYTECODE"))
    os.chdir(job["cwd"])
    sys.path[:] = [job["cwd"], *entries(env.get("PYTHONPATH")), *[p for p in sys.path[1:] if p not in SERVER_ENTRIES]]
    random.seed()  # seeded from the OS at its import, as in a new interpreter
    if "numpy.random" in sys.modules:
        sys.modules["numpy.random"].seed()
    logs_from_env()
    sys.argv = [job["module"], *job["args"]]
    runpy.run_module(job["module"], run_name="__main__", alter_sys=True)


say({{"ready": True}})
children = {{}}


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
        data, fds, _, _ = socket.recv_fds(control, 1 << 20, 3)
        if not data:
            break
        job = json.loads(data)
        pid = os.fork()
        if pid == 0:
            child(job, fds)
        for fd in fds:
            os.close(fd)
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
os._exit(0)  # skip torch's interpreter teardown (1.3 s at the end of every diagnosis): `close()` waits for this exit
"""

_READY_S = 300.0
_ANSWER_S = 60.0  # a fork is answered in milliseconds; this long only on a machine that hardly runs it

# What a program forked from the server sets up again from its own environment (`program` in the server's source):
# the import path, bytecode's place and torch's logging (the structured trace among it).
REDONE = frozenset({"PYTHONPATH", "PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE", "TORCH_TRACE", "TORCH_LOGS",
                    "TORCH_LOGS_OUT"})  # the server's imports, at low priority on a busy machine


@functools.cache
def _server_source(nice: int) -> str:
    return _SERVER.format(prewarm=prewarm_inductor_source(), autotune_anew=autotune_anew_source(),
                          logs_from_env=logs_from_env_source(), set_priority=set_priority_source(), nice=nice)


class ForkedProcess:
    """A program the server forked (`FreshForks.start_module`), seen as `subprocess.Popen` shows a child: `pid` (it
    leads its own process group), `returncode` (minus the signal it died of), `wait(timeout)`. A server
    that ended takes its children with it: their code is SIGKILL's."""

    def __init__(self, pid: int, code: Future[int], forget: Callable[[], None]) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._code = code
        self._forget = forget

    def wait(self, timeout: float | None = None) -> int:
        try:
            code = self._code.result(timeout=timeout)
        except TimeoutError:
            raise subprocess.TimeoutExpired(f"fork {self.pid}", timeout or 0.0) from None
        except EOFError:
            code = -signal.SIGKILL
        if self.returncode is None:
            self.returncode = code
            self._forget()
        return code


class FreshForks:
    def __init__(self, cwd: Path, *, urgent: bool = False) -> None:
        """`urgent`: its imports at normal priority (what it forks is awaited soon: the worker pool's zygote),
        else at low priority."""
        self.cwd = Path(cwd)
        self.cwd.mkdir(parents=True, exist_ok=True)
        self._env = worker_env()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._control: socket.socket | None = ours
        with theirs:
            self._proc: subprocess.Popen[bytes] | None = launch.start(
                [sys.executable, "-c", _server_source(0 if urgent else BACKGROUND_NICE)], cwd=self.cwd,
                stdin=theirs.fileno(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=self._env)
        self._ready = threading.Event()
        self._pids: dict[int, Future[int]] = {}
        self._codes: dict[int, Future[int]] = {}
        self._ids = itertools.count()
        self._names = itertools.count()
        self._lock = threading.Lock()
        self._ended = False  # the server's output has ended: it answers no request (`_read`)
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
        with self._lock:  # a request made from here on is refused at once (`_request`)
            self._ended = True
            waiting = [f for f in (*self._pids.values(), *self._codes.values()) if not f.done()]
        self._ready.set()  # the server ended: whoever waits learns it below
        for future in waiting:
            future.set_exception(EOFError("the fresh-forks server ended"))

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def run(self, path: Path, timeout_s: float, env: dict[str, str] | None = None) -> Ran | None:
        if not self._ready.wait(_READY_S) or not self.alive:
            return None
        path = Path(path).resolve()
        name = next(self._names)
        out, err = self.cwd / f".fork-{name}.out", self.cwd / f".fork-{name}.err"
        try:
            job, pid, code_of = self._request({"path": str(path), "out": str(out), "err": str(err), "env": env})
            try:
                code: int | None = code_of.result(timeout=timeout_s)
            except TimeoutError:
                with suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
                code_of.result()
                code = None
        except (OSError, EOFError, TimeoutError):
            return None
        try:
            return Ran(code, out.read_text(errors="replace"), err.read_text(errors="replace"))
        finally:
            out.unlink(missing_ok=True)
            err.unlink(missing_ok=True)

    @property
    def environment(self) -> Mapping[str, str]:
        """The server's environment: what torch read on its import."""
        return self._env

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait until the server has made its imports; False if it has not by then, or ended."""
        return self._ready.wait(timeout_s) and self.alive

    def forks_for(self, env: Mapping[str, str]) -> bool:
        """Whether a program with the environment `env` starts here as it would in a new interpreter: it differs
        from the server's only in what a fork sets up again (`REDONE`), and in the compile caches' folders where the
        server was given none (torch reads them as it compiles; this process's torch pins its default in its own
        environment once it has compiled)."""
        def kept(e: Mapping[str, str]) -> dict[str, str]:
            return {k: v for k, v in e.items() if k not in REDONE and (k in self._env or k not in COMPILE_CACHE_VARS)}

        return kept(env) == kept(self._env)

    def start_module(self, module: str, args: Sequence[str], *, env: Mapping[str, str], cwd: Path, out: Path,
                     err: Path, stdin: int | None = None, stdout: int | None = None) -> ForkedProcess | None:
        """`python -m MODULE ARGS` in `cwd` with the environment `env` (see `forks_for`), its stdout and stderr to
        `out` and `err` (one descriptor for both where they are the same file), forked once the server is ready (it
        started before any interpreter that would be started instead: waiting is the sooner start); `stdin`,
        `stdout`: descriptors of this process's (a pipe's end) the program gets as its own instead (the caller keeps
        and closes its copies). None where it has ended, or never became ready."""
        if not self.wait_ready(_READY_S):
            return None
        request = {"module": module, "args": list(args), "env": dict(env), "cwd": str(cwd), "out": str(out),
                   "err": str(err)}
        given = {fd: mine for fd, mine in ((0, stdin), (1, stdout)) if mine is not None}
        try:
            job, pid, code_of = self._request(request, keep=True, given=given)
        except (OSError, EOFError, TimeoutError):
            return None
        return ForkedProcess(pid, code_of, lambda: self._forget(job))

    def _request(self, fields: dict[str, Any], keep: bool = False, given: Mapping[int, int] | None = None
                 ) -> tuple[int, int, Future[int]]:
        """Ask the server for a fork: (the job's number, the child's pid, its exit code to come). `keep`: the caller
        forgets the job (`_forget`) once it has the code; `given`: descriptors of ours handed over, by the one each
        becomes in the child."""
        job = next(self._ids)
        given = given or {}
        try:
            with self._lock:
                if self._ended or self._proc is None or self._control is None:
                    raise EOFError("the fresh-forks server has ended")
                self._pids[job], self._codes[job] = Future(), Future()
                request = json.dumps({"id": job, "fds": list(given), **fields}).encode()
                socket.send_fds(self._control, [request], list(given.values()))
            pid = self._answer(self._pids[job])
        except BaseException:
            self._forget(job)
            raise
        code_of = self._codes[job]
        if not keep:
            code_of.add_done_callback(lambda _: self._forget(job))
        return job, pid, code_of

    def _answer(self, pid: Future[int]) -> int:
        """The pid the server forked for a request, once it says; EOFError where it ended first, TimeoutError where
        it says nothing for a minute."""
        deadline = time.monotonic() + _ANSWER_S
        while True:
            try:
                return pid.result(timeout=0.2)
            except TimeoutError:
                if not self.alive:  # stopped from outside while it forked: its output may not end yet (`_read`)
                    raise EOFError("the fresh-forks server ended") from None
                if time.monotonic() > deadline:
                    raise

    def _forget(self, job: int) -> None:
        self._pids.pop(job, None)
        self._codes.pop(job, None)

    def close(self) -> None:
        """The server kills its children once its requests end; what it could not (it was killed) is killed here."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with self._lock:
            control, self._control = self._control, None
        if control is not None:
            control.close()
        try:
            proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            launch.stop(proc, signal.SIGKILL, grace_s=1.0)
        for pid in list(self._live):
            with suppress(OSError):
                os.killpg(pid, signal.SIGKILL)

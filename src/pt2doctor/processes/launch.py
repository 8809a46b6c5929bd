"""Start a program as a child that leads its own process group; run one to its end with a timeout.

Every `subprocess` child of pt2doctor starts here (the forked ones in `processes.group`): the user's
script under capture (`capture.runner`), the graph recorder's run, the source look-up, the bisector,
a repro, a tool such as compute-sanitizer or the C++ compiler's `--version`. A child that leads its
own group can be stopped with everything it started (Inductor's compile workers, torchrun's ranks),
and a Ctrl-C typed at the terminal reaches pt2doctor, which decides what the child gets.
This module imports nothing of pt2doctor but `processes.group`, so any layer may start a child.
Contract:
- `start(argv, ...)`: `subprocess.Popen` with `start_new_session=True`, the other arguments as Popen's.
- `stop(proc, first)`: send `first` to the child's group, wait `grace_s`, then SIGKILL it; returns once
  the child was reaped. A group already gone is not an error.
- `run(argv, timeout_s=..., ...)`: start, collect stdout and stderr (`merge_output`: stderr into stdout),
  and at the timeout kill the whole group: `Ran.returncode` is None then. A Ctrl-C kills the group too and
  is re-raised. A program that cannot be started raises OSError, as Popen does.
- `compile_caches_in(folder)`: the environment that gives a child torch's compile caches of its own
  (Inductor's and Triton's, named by `COMPILE_CACHE_VARS`) in `folder`.
- `signal_all(sig)`: `sig` to the group of every child started here that is still running, without waiting (a
  diagnosis being stopped ends its runs and verifications at once; whoever started each reaps it); from then on
  `ending()` is True, and what would start a process in place of one that ended (a verification's fresh interpreter
  where its fork server died) starts none.
- `Priority(nice)`: the priority of the children given it (`watch(pid)`: each leads its own session, whose
  autogroup takes the nice, so what the child starts, its compiler among it, shares it): background work, which
  takes the cores the work awaited leaves idle, until `urgent()` gives them normal priority (where the system lets
  a process raise a priority again: without privileges they stay where they were, and still get every idle core).
- `threads_wait_passively(wanted)`: every process started inside it (from `os.environ`: what any child of pt2doctor
  starts from) has OpenMP's idle threads sleep rather than spin (`PASSIVE_WAIT`), where the user set no wait policy.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from pt2doctor.processes import group as process_group

GRACE_S = 5.0
COMPILE_CACHE_VARS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
# OpenMP's threads (ATen's, oneDNN's, an Inductor kernel's `#pragma omp parallel`) wait for the next parallel region
# by spinning where no policy is set (libgomp's default): alone, a program then gets its next region a little sooner;
# beside another program on a few cores, its spinning threads burn the cores the other needs. Two forked runs of
# ResNet's program side by side on 2 cores took 4.6-4.7 s and 4.3-4.5 CPU-s each spinning, 2.4 s and 2.1 CPU-s
# passive (alone: 2.2 s either way). How a thread waits changes no value a kernel computes. Read by OpenMP as it
# loads: a process forked after `import torch` keeps the policy of the process it was forked from.
PASSIVE_WAIT = {"OMP_WAIT_POLICY": "PASSIVE"}

Stream = int | IO[Any] | None


@dataclass(frozen=True, slots=True)
class Ran:
    """How a program run to its end ended: its exit status (None: killed at the timeout, with its group)."""

    returncode: int | None
    stdout: str
    stderr: str

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


_STARTED: weakref.WeakSet[subprocess.Popen[Any]] = weakref.WeakSet()  # what `signal_all` reaches


def start(argv: Sequence[str], *, cwd: Path | str | None = None, env: Mapping[str, str] | None = None,
          stdin: Stream = None, stdout: Stream = None, stderr: Stream = None, text: bool = False
          ) -> subprocess.Popen[Any]:
    proc = subprocess.Popen(list(argv), cwd=cwd, env=None if env is None else dict(env), stdin=stdin, stdout=stdout,
                            stderr=stderr, text=text, start_new_session=True)
    _STARTED.add(proc)
    return proc


_ENDING = threading.Event()


def ending() -> bool:
    """Every child was told to end (`signal_all`): the process is stopping."""
    return _ENDING.is_set()


def signal_all(sig: signal.Signals = signal.SIGTERM) -> None:
    _ENDING.set()
    for proc in list(_STARTED):
        if proc.returncode is None:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)


class Priority:
    """See the module's contract."""

    def __init__(self, nice: int = process_group.BACKGROUND_NICE) -> None:
        self._nice = nice
        self._pids: set[int] = set()
        self._lock = threading.Lock()

    @property
    def background(self) -> bool:
        return self._nice > 0

    def watch(self, pid: int) -> None:
        """`pid` (a child leading its own session, or about to: a fork sets its session up just after the fork)
        runs at this priority from now on."""
        with self._lock:
            self._pids.add(pid)
            nice = self._nice
        if nice and _leads_session(pid):
            process_group.set_priority(nice, pid)

    def urgent(self) -> None:
        """Its children are awaited now: normal priority from here on."""
        with self._lock:
            lowered, self._nice = self._nice, 0
            pids = list(self._pids)
        for pid in pids if lowered else ():
            process_group.set_priority(0, pid)


def _leads_session(pid: int, wait_s: float = 1.0) -> bool:
    """Whether `pid` leads its own session, waiting up to `wait_s` for a child just forked to set it up: its
    session's autogroup, written before, would be its parent's."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            if os.getsid(pid) == pid:
                return True
        except OSError:  # it has ended already
            return False
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)


class Stoppable(Protocol):
    """What `stop` needs of a process: a `subprocess.Popen`, or a program forked for us (`ForkedProcess`)."""

    pid: int

    @property
    def returncode(self) -> int | Any: ...

    def wait(self, timeout: float | None = None) -> int: ...


class ModuleStarter(Protocol):
    """Starts `python -m MODULE ARGS` other than as a new interpreter, where it starts there the same way
    (`fresh_forks.FreshForks`: forked after torch's import); `capture.runner` asks it for a run's child."""

    def forks_for(self, env: Mapping[str, str]) -> bool: ...

    def start_module(self, module: str, args: Sequence[str], *, env: Mapping[str, str], cwd: Path, out: Path,
                     err: Path) -> Stoppable | None: ...


def stop(proc: Stoppable, first: signal.Signals = signal.SIGTERM, grace_s: float = GRACE_S) -> None:
    for sig in (first, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        try:
            proc.wait(timeout=grace_s)
            break
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            continue
    if proc.returncode is None:
        proc.wait()


def run(argv: Sequence[str], *, timeout_s: float | None, cwd: Path | str | None = None,
        env: Mapping[str, str] | None = None, merge_output: bool = False) -> Ran:
    proc = start(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                 stderr=subprocess.STDOUT if merge_output else subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process_group.kill_group(proc.pid)
        out, err = proc.communicate()
        return Ran(None, out or "", err or "")
    except BaseException:  # a Ctrl-C: the program goes with us
        process_group.kill_group(proc.pid)
        proc.wait()
        raise
    return Ran(proc.returncode, out or "", err or "")


def compile_caches_in(folder: Path) -> dict[str, str]:
    inductor, triton = COMPILE_CACHE_VARS
    return {inductor: str(folder / "inductor"), triton: str(folder / "triton")}


@contextmanager
def threads_wait_passively(wanted: bool = True) -> Iterator[None]:
    """`PASSIVE_WAIT` in this process's environment while inside (see `PASSIVE_WAIT`), so every process started here
    meanwhile has it, and every process forked from one of those; the user's own policy, where set, stands; nothing
    where not `wanted`."""
    name, value = next(iter(PASSIVE_WAIT.items()))
    if not wanted or name in os.environ:
        yield
        return
    os.environ[name] = value
    try:
        yield
    finally:
        os.environ.pop(name, None)

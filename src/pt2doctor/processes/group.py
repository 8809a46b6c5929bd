"""Child processes that lead their own process group, so killing one also kills what it started.

The primitives every pool of ours uses: the minifier's forked candidates (`processes.forks`), its warm
servers (`processes.servers`), the zygote itself (`processes.pool`) and the bisector's queries
(`bisect.child`). Each pool keeps its own policy (what a job is, how many run at once); how a
child is started, waited for, killed and described is decided here once.
Contract:
- `fork_in_group(body)`: fork; the child makes itself a process-group leader, runs `body()` and
  exits with what it returns (`error_code` if it raises); it never returns into the caller's code
  (nor runs its atexit handlers). The parent gets the pid.
- `exit_code(status)`: a wait status as `subprocess` says it: the exit code, or `-N` for signal N.
- `wait(pid, timeout_s)`: that code once `pid` ended, or None if it still runs at the deadline
  (`timeout_s=None` waits for ever). `wait_any()` is the same for any child, without blocking.
- `kill_group(pid)`: SIGKILL the group; a group already gone is not an error. `reap(pid)` kills
  the group, then waits for its leader.
- `overdue(deadlines)`: the keys whose `time.monotonic()` deadline has passed.
- `signal_name(code)`: `"SIGSEGV"` for -11; None for an exit.
- `set_priority(nice, pid=0)`: a process (this one) that leads its own session (as every child `launch.start` starts
  does) at nice `nice`, with its session's autogroup: Linux's autogroup scheduling (on in most distributions) shares
  the CPU between sessions first, a process's own nice orders it only within its session, so nice alone would lower
  nothing. Where the system refuses (raising priority again needs privileges), it stays as it was. Self-contained:
  its source runs in the interpreters that verify (`processes.fresh`, `processes.fresh_forks`: `set_priority_source`).
"""

from __future__ import annotations

import inspect
import os
import signal
import time
from collections.abc import Callable, Iterable
from contextlib import suppress
from typing import TypeVar

K = TypeVar("K")
_POLL_S = 0.02
BACKGROUND_NICE = 10  # background work's nice: what the work awaited leaves idle, it takes (`launch.Priority`)


def fork_in_group(body: Callable[[], int], *, error_code: int = 2) -> int:
    pid = os.fork()
    if pid == 0:
        code = error_code
        try:
            os.setpgid(0, 0)
            code = body()
        finally:
            os._exit(code)
    return pid


def exit_code(status: int) -> int:
    return os.waitstatus_to_exitcode(status)


def wait(pid: int, timeout_s: float | None = None) -> int | None:
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        done, status = os.waitpid(pid, 0 if deadline is None else os.WNOHANG)
        if done:
            return exit_code(status)
        if time.monotonic() > deadline:  # type: ignore[operator]
            return None
        time.sleep(_POLL_S)


def wait_any() -> tuple[int, int] | None:
    pid, status = os.waitpid(-1, os.WNOHANG)
    return (pid, exit_code(status)) if pid else None


def kill_group(pid: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def reap(pid: int) -> int:
    kill_group(pid)
    return exit_code(os.waitpid(pid, 0)[1])


def overdue(deadlines: Iterable[tuple[K, float]]) -> list[K]:
    now = time.monotonic()
    return [key for key, deadline in deadlines if deadline <= now]


def signal_name(code: int) -> str | None:
    return signal.Signals(-code).name if code < 0 else None


def set_priority(nice: int, pid: int = 0) -> None:
    import os

    try:  # noqa: SIM105 - self-contained (its source runs where contextlib is not imported)
        os.setpriority(os.PRIO_PROCESS, pid, nice)
    except OSError:
        pass
    try:
        with open(f"/proc/{pid or 'self'}/autogroup", "w") as autogroup:
            autogroup.write(str(nice))
    except OSError:
        pass


def set_priority_source() -> str:
    """The source of `set_priority`, defined, not called."""
    return inspect.getsource(set_priority)


"""Run a program (another interpreter, pip) in a process group of its own, its output kept in files.

Contract: `run_program(argv, cwd=..., logs=..., timeout_s=..., env=..., watch=...)` forks through
`process_group.fork_in_group`, so the child leads its own group and everything it starts (pip's builds,
a compile worker of torch) is killed with it; the child sends stdout and stderr to `logs/stdout.txt` and
`logs/stderr.txt` and replaces itself with `argv` (`execve`: nothing of this interpreter runs in it).
While it runs, `watch(stdout_so_far)` is called every poll: it may report progress, and a non-empty
answer stops the program (its group killed) with that reason. Returns `Finished`: the exit code (None
when stopped: `stopped` says why, `timeout` at `timeout_s`), both outputs and the wall time. A program
that cannot be started (no such file) exits 127 with the reason in its stderr file.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pt2doctor.processes import group as process_group

_POLL_S = 0.25
NOT_STARTED = 127


@dataclass(frozen=True, slots=True)
class Finished:
    returncode: int | None
    stdout: str
    stderr: str
    wall_s: float
    stopped: str = ""


def run_program(argv: Sequence[str], *, cwd: Path, logs: Path, timeout_s: float | None = None,
                env: Mapping[str, str] | None = None, watch: Callable[[str], str] | None = None) -> Finished:
    logs.mkdir(parents=True, exist_ok=True)
    out, err = logs / "stdout.txt", logs / "stderr.txt"
    environ = dict(os.environ if env is None else env)
    started = time.monotonic()
    pid = process_group.fork_in_group(lambda: _exec(list(argv), cwd, out, err, environ), error_code=NOT_STARTED)
    deadline = None if timeout_s is None else started + timeout_s
    stopped = ""
    try:
        while (code := process_group.wait(pid, _POLL_S)) is None:
            stopped = "timeout" if deadline is not None and time.monotonic() > deadline else (
                watch(_read(out)) if watch is not None else "")
            if stopped:
                process_group.reap(pid)
                break
    except BaseException:  # Ctrl-C: the program goes with us
        process_group.reap(pid)
        raise
    return Finished(None if stopped else code, _read(out), _read(err), round(time.monotonic() - started, 3), stopped)


def _exec(argv: list[str], cwd: Path, out: Path, err: Path, env: dict[str, str]) -> int:
    """In the forked child: the output files as stdout and stderr, then `argv` in place of this process."""
    for path, fd in ((out, 1), (err, 2)):
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(handle, fd)
        os.close(handle)
    try:
        os.chdir(cwd)
        os.execve(argv[0], argv, env)
    except OSError as exc:
        os.write(2, f"cannot start {argv[0]}: {exc.strerror or exc}\n".encode())
    return NOT_STARTED


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode(errors="replace")
    except OSError:
        return ""


def this_interpreter() -> str:
    """The interpreter pt2doctor runs in: the user's, whose torch is the user's release."""
    return sys.executable

"""Run a file the way a user would: `python repro.py` in a fresh interpreter; and verify a repro that way.

Contract: `run_file(path, timeout_s)` is the one way pt2doctor runs a file it wrote (a repro, a replay,
a harness) in a fresh interpreter: in the file's folder, in its own process group, killed with everything
it started at the timeout. `verify(path, target)` runs the script with the current interpreter in new processes,
several side by side (no pt2doctor on the import path is needed, nothing inherited but the
environment), with a timeout, and says how many failed with exactly the target signature. A repro is
reported as verified only when every run did (`verified=True`); some but not all is flaky.

`FreshInterpreter(cwd)` starts that process early, so its interpreter start and `import torch`
overlap the reduction: it imports exactly the modules every repro imports on its first lines
(`repro.render` writes them) and nothing else, then blocks on stdin for the script's path and runs
it as `__main__` (`runpy`), with `sys.argv` and the working directory `python repro.py` would
have. Told `prewarm()` (by the pool, once its zygote is warm: earlier, the probe's file lock
would make the zygote wait on this low-priority process), it also imports Inductor and runs
Inductor's CPU-capability probe (`torch_compat.prewarm_inductor`, ~2 s a repro would
otherwise spend on its first compile): the probe's answer is a cached fact about the machine that
the repro's first compile computes identically. So the state it runs the script in is the state `python repro.py`
reaches after its import lines, plus modules it would import and a machine probe it would run: nothing of any
candidate, nothing of pt2doctor. It autotunes anew (`torch_compat.autotune_anew`), as `python repro.py` does on a
machine that never ran these kernels: an earlier verification's choice of block size is not read. Once the script
has exited (`sys.exit`, as a repro does, or by
returning) its exit status and output are final, so the interpreter's teardown (~1 s with torch
loaded, more with a CUDA context) is skipped; an uncaught exception or a signal ends it the
ordinary way. It imports at low priority (nice 10, its session's autogroup too: `group.set_priority`; on a
few cores the worker pool's warm-up is the critical path) and takes its normal priority back, where
it may, before it runs the script. One interpreter verifies one script; when it has died (killed from outside), `verify`
starts a new one.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pt2doctor.capture.bytecode_cache import worker_env
from pt2doctor.capture.torch_compat import autotune_anew_source, prewarm_inductor_source
from pt2doctor.model.minify import FailureSignature, VerifyRuns
from pt2doctor.model.signature import from_exit
from pt2doctor.processes import launch
from pt2doctor.processes.group import set_priority, set_priority_source
from pt2doctor.processes.launch import Ran

if TYPE_CHECKING:
    from pt2doctor.processes.fresh_forks import FreshForks

# The repro's own first import lines (see `repro.render`); nothing of pt2doctor.
_BOOT_TEMPLATE = """\
import os, runpy, sys
{set_priority}
set_priority(10)
import traceback
import torch
import torch._dynamo
import torch.fx
{autotune_anew}
path = sys.stdin.readline().strip()
if path == "prewarm":
{prewarm}
    path = sys.stdin.readline().strip()
set_priority(0)
if path:
    sys.argv = [os.path.basename(path)]
    sys.path[0] = os.path.dirname(path)
    code = 0
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exit:  # what the interpreter would do with it, then no teardown
        code = exit.code or 0
        if not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
"""


@functools.cache
def _boot() -> str:
    """The verifier's program, built on first use (it reads the prewarm's source from `torch_compat/warm.py`)."""
    return _BOOT_TEMPLATE.format(prewarm=textwrap.indent(prewarm_inductor_source(), "    "),
                                 autotune_anew=autotune_anew_source(), set_priority=set_priority_source())


# A repro that fails on about half of its runs passes one verification half the time: each is run this many
# times side by side (on the cores there are, so it costs little wall time), and only every time counts.
VERIFY_RUNS = max(2, min(os.cpu_count() or 2, 4))


@dataclass(frozen=True, slots=True)
class Verification:
    """`seen`, `returncode` and `output_tail` are of the first run that did not fail as the target (the
    first run when all did); `runs` says how many of them did."""

    seen: FailureSignature | None
    returncode: int | None
    output_tail: str = ""
    runs: VerifyRuns = VerifyRuns(0, 0)

    @property
    def verified(self) -> bool:
        return self.runs.every_time


class FreshInterpreter:
    """A fresh `python` that has imported only torch (as every repro does first) and waits for a script."""

    def __init__(self, cwd: Path, env: dict[str, str] | None = None) -> None:
        """`env`: its environment (pt2doctor's worker environment made from it), else this process's."""
        Path(cwd).mkdir(parents=True, exist_ok=True)
        self.cwd = Path(cwd)
        # its own process group: a Ctrl-C meant for the reduction must not kill the verifier
        self._proc: subprocess.Popen[str] | None = launch.start(
            [sys.executable, "-c", _boot()], cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=worker_env(env))

    def prewarm(self) -> None:
        """Import Inductor and run its CPU probe now, while waiting (see the module docstring)."""
        if self.alive:
            try:
                self._proc.stdin.write("prewarm\n")  # type: ignore[union-attr]
                self._proc.stdin.flush()  # type: ignore[union-attr]
            except OSError:
                pass  # it died; `verify` starts a new one

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def run(self, path: Path, timeout_s: float) -> subprocess.CompletedProcess[str]:
        """Run `path` (which must lie in `cwd`) as `__main__`; TimeoutExpired after `timeout_s`."""
        proc, self._proc = self._proc, None
        if proc is None:
            raise RuntimeError("a FreshInterpreter runs one script only")
        if Path(path).resolve().parent != self.cwd.resolve():
            proc.kill()
            proc.wait()
            raise ValueError(f"{path} is not in {self.cwd}")
        set_priority(0, proc.pid)  # imports still running go at full speed now (where allowed: the script tries too)
        try:
            out, err = proc.communicate(str(Path(path).resolve()) + "\n", timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def close(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.communicate()
            self._proc = None


def run_file(path: Path, timeout_s: float, env: dict[str, str] | None = None) -> Ran:
    """`python FILE` in its own folder and its own process group, as a user runs a repro; at `timeout_s` the
    group is killed (the compile workers a script's Inductor started go with it)."""
    return launch.run([sys.executable, path.name], cwd=path.parent, env=worker_env(env), timeout_s=timeout_s)


def verify(path: Path, target: FailureSignature, *, timeout_s: float = 300.0,
           interpreter: FreshInterpreter | None = None, runs: int = VERIFY_RUNS,
           env: dict[str, str] | None = None, at_once: int | None = None,
           forks: FreshForks | None = None) -> Verification:
    """Run `path` in `runs` fresh interpreters, `at_once` of them at a time (default: all; the first in
    `interpreter`, when it is alive; the others forked from `forks` where given: `processes.fresh_forks`), and count
    those that failed with exactly `target`; `env`, when given, is the environment of those started here (an
    `interpreter` keeps its own)."""
    with ThreadPoolExecutor(min(runs, at_once or runs)) as threads:
        done = list(threads.map(lambda i: _run_once(path, timeout_s, interpreter if i == 0 else None, env, forks),
                                range(runs)))
    same = [seen == target for seen, _, _ in done]
    seen, returncode, tail = next((d for d, ok in zip(done, same) if not ok), done[0])
    return Verification(seen, returncode, tail, VerifyRuns(sum(same), runs))


def _run_once(path: Path, timeout_s: float, interpreter: FreshInterpreter | None, env: dict[str, str] | None,
              forks: FreshForks | None) -> tuple[FailureSignature | None, int | None, str]:
    ran = None
    if interpreter is None or not interpreter.alive:  # forked where it can be, else a fresh interpreter of its own
        ran = forks.run(path, timeout_s, worker_env(env) if env is not None else None) if forks else None
        if ran is None and launch.ending():  # the diagnosis is stopping: its fork server was ended, start nothing
            return None, None, "stopped"
        interpreter = FreshInterpreter(path.parent, env) if ran is None else None
    if interpreter is not None:
        try:
            proc = interpreter.run(path, timeout_s)
        except subprocess.TimeoutExpired:
            return None, None, "timed out"
        ran = Ran(proc.returncode, proc.stdout, proc.stderr)
    assert ran is not None
    if ran.returncode is None:
        return None, None, "timed out"
    return from_exit(ran.returncode, ran.output), ran.returncode, ran.output[-2000:]

"""Before the program is blamed: does a trivial program of the same kind fail the same way here?

Contract: `start_control(kind, device, target, out_dir)` writes a one-op program that goes through the same compiler
on the same device (`torch.compile(..., backend="inductor")`, or for AOTInductor: export, compile and package, load,
call) and starts running it in a fresh interpreter (`processes.fresh`, the oracle every repro is verified with), in
a thread, so that it overlaps the steps after reproduction; `ControlRun.result()` is the `Control` it gives;
`control_in(pool, ...)` runs it as one job of warm workers already open instead (the minifier's: no interpreter
start, no `import torch`), judged the same way: whether it failed with the script's failure identity (`target`) and
how it ended. When it did, the machine is at fault (a missing or broken C++ compiler, a broken Triton, AOTInductor
packages that do not load), not the program: `diagnose` says so in the headline, minifies nothing and names no
culprit (issue 30: every AOTInductor package segfaulting in `aoti_load_package` on one machine's image was
"minified" to a one-node culprit and called verified). Only compilers the control can name are checked: Inductor and
AOTInductor; a backend defined in the user's script has no control (its failure is the script's own either way).
"""

from __future__ import annotations

import textwrap
import threading
from collections.abc import Callable
from concurrent.futures import Future
from enum import Enum
from pathlib import Path

from pt2doctor.model.diagnosis import Control
from pt2doctor.model.minify import FailureSignature
from pt2doctor.processes.fresh import verify
from pt2doctor.processes.pool import WorkerPool
from pt2doctor.reduce.core import Outcome
from pt2doctor.reduce.oracle import judge, signature_of
from pt2doctor.reduce.program_harness import ProgramRun, harness_text


class ControlKind(str, Enum):
    INDUCTOR = "torch.compile with Inductor"
    AOTI = "AOTInductor (export, compile and package, load, call)"


_SOURCES = {
    ControlKind.INDUCTOR: """\
        import torch

        x = torch.randn(8, device={device!r})
        print(torch.compile(lambda t: t.sin() + 1, backend="inductor")(x).sum().item())
    """,
    ControlKind.AOTI: """\
        import os, tempfile
        import torch


        class One(torch.nn.Module):
            def forward(self, t):
                return t.sin() + 1


        x = torch.randn(8, device={device!r})
        program = torch.export.export(One(), (x,))
        path = torch._inductor.aoti_compile_and_package(program,
                                                        package_path=os.path.join(tempfile.mkdtemp(), "one.pt2"))
        print(torch._inductor.aoti_load_package(path)(x).sum().item())
    """,
}


class ControlRun:
    """A control running in the background; `result()` waits for it (None: it could not be run). Its thread is
    a daemon: a diagnosis interrupted before it asked never waits for the control at exit."""

    def __init__(self, run: Callable[[], Control | None]) -> None:
        self._future: Future[Control | None] = Future()
        threading.Thread(target=self._work, args=(run,), daemon=True, name="pt2doctor-control").start()

    def _work(self, run: Callable[[], Control | None]) -> None:
        try:
            self._future.set_result(run())
        except BaseException as exc:  # noqa: BLE001 - handed to whoever asks for the result
            self._future.set_exception(exc)

    def result(self) -> Control | None:
        return self._future.result()


def start_control(kind: ControlKind, device: str, target: FailureSignature, out_dir: Path,
                  timeout_s: float = 300.0) -> ControlRun:
    harness = _write(kind, device, out_dir)
    return ControlRun(lambda: _run(kind, device, harness, target, timeout_s))


def control_in(pool: WorkerPool, kind: ControlKind, device: str, target: FailureSignature, out_dir: Path) -> Control:
    """The control run as one job of warm workers (the minifier's, already open): a child forked from a process that
    imported torch and warmed the compiler up, judged by the same rule, without a new interpreter's start."""
    harness = _write(kind, device, out_dir)
    (ran,) = pool.run([harness.read_text()])
    seen = signature_of(ran)
    return Control(program=f"one op ({kind.value}, on {device})", path=str(harness.with_name("control.py")),
                   fails_the_same_way=judge(ran, target) is Outcome.FAILS_SAME,
                   ended="passed" if ran.status == "ok" else f"failed: {seen or ran.text[-200:]}")


def _write(kind: ControlKind, device: str, out_dir: Path) -> Path:
    """control.py, and the harness that judges it as a program repro is (`reduce.program_harness`): the same
    failure identity as the script's."""
    folder = out_dir / "control"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "control.py"
    path.write_text(textwrap.dedent(_SOURCES[kind]).format(device=device))
    harness = folder / "control_judged.py"
    harness.write_text(harness_text(path.read_text(), ProgramRun(str(path), str(folder), (path.name,))))
    return harness


def _run(kind: ControlKind, device: str, harness: Path, target: FailureSignature, timeout_s: float) -> Control | None:
    try:
        ran = verify(harness, target, timeout_s=timeout_s, runs=1)
    except OSError:
        return None
    ended = "passed" if ran.seen is None and ran.returncode == 0 else f"failed: {ran.seen or ran.output_tail[-200:]}"
    return Control(program=f"one op ({kind.value}, on {device})", path=str(harness.with_name("control.py")),
                   fails_the_same_way=ran.verified,
                   ended=ended)

"""The bisector started before the repro exists (`bisect.driver.PendingBisection`): deferred until asked, forked on the
fresh-forks server where one is given (torch and Inductor imported there already), and its answer read back."""

from __future__ import annotations

from pathlib import Path

from pt2doctor.bisect.driver import PendingBisection
from pt2doctor.processes.fresh_forks import ForkedProcess, FreshForks

REPRO = '''\
import torch


class Repro(torch.nn.Module):
    def forward(self, x):
        return (x + 1,)


def make_inputs():
    return [torch.randn(4)]


def describe_failure(exc):
    return f"{type(exc).__name__}: {exc}"
'''


def test_a_deferred_bisector_starts_when_asked_forked_on_the_server_and_answers(tmp_path: Path) -> None:
    server = FreshForks(tmp_path / "fresh", urgent=True)
    try:
        pending = PendingBisection(tmp_path / "bisect", cuda=False, deferred=True, forks=server)
        assert not (tmp_path / "bisect").exists()  # deferred: nothing started yet
        pending.start()
        assert isinstance(pending._proc, ForkedProcess)
        repro = tmp_path / "repro.py"
        repro.write_text(REPRO)
        bisection = pending.run(repro, "ValueError: never raised", backend="eager")
        assert bisection.note == "the repro does not fail under backend='eager' in the bisection process"
        assert pending._proc.returncode == 0
    finally:
        server.close()


def test_a_bisector_dismissed_before_its_job_ends_without_one(tmp_path: Path) -> None:
    pending = PendingBisection(tmp_path / "bisect", cuda=False)  # no server: a new interpreter
    pending.cancel()
    assert pending._proc is not None and pending._proc.returncode is not None
    PendingBisection(tmp_path / "never", cuda=False, deferred=True).cancel()  # never started: nothing to end

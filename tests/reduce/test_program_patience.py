"""The program reducer stops after `patience` new candidates in a row kept nothing (issue 30: 1300 checks on a
14-line script, the best found early), and keeps the checks that did keep a smaller program. A candidate refused
unrun (it breaks a name: `reduce.program_keep.Keep`) counts as one that kept nothing, and is no check."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pt2doctor.reduce.core import Outcome
from pt2doctor.reduce.program_check import ProgramReduction, StopReduction

SOURCE = "import torch\nx = 1\ny = 2\nz = 3\ntorch.compile(print)\n"


class Oracle:
    """Fails the same way while `torch.compile(print)` stays; counts its checks."""

    def __init__(self) -> None:
        self.pool = SimpleNamespace(timeout_s=60.0)
        self.asked = 0

    def __call__(self, source: str) -> Outcome:
        self.asked += 1
        return Outcome.FAILS_SAME if "torch.compile(print)" in source else Outcome.PASSES


class Quiet:
    def status(self, text: str) -> None:
        pass


def test_the_reduction_stops_after_patience_checks_that_kept_nothing():
    oracle = Oracle()
    reduction = ProgramReduction(oracle, SOURCE, 600.0, Quiet(), patience=3)  # type: ignore[arg-type]
    assert reduction(SOURCE)  # check 1: the original
    assert reduction("import torch\ntorch.compile(print)\n")  # check 2: smaller, kept
    assert not reduction("torch.compile(len)\n")  # candidate 3: `torch` unbound, refused unrun
    for n in range(2):  # checks 3-4: nothing kept (each still calls a compiler, as every candidate must)
        assert not reduction(f"import torch\ntorch.compile(len)\nv = {n}\n")
    with pytest.raises(StopReduction):
        reduction("import torch\ntorch.compile(len)\nw = 4\n")
    assert reduction.stopped == "no_progress" and oracle.asked == 4 and reduction.checks == 4
    assert reduction.improved_at == [2]


def test_without_patience_only_the_budget_stops_it():
    reduction = ProgramReduction(Oracle(), SOURCE, 600.0, Quiet())  # type: ignore[arg-type]
    for n in range(50):
        reduction(f"import torch\ntorch.compile(len)\nv = {n}\n")
    assert reduction.stopped is None and reduction.checks == 50


def test_seconds_that_kept_nothing_stop_it_too(monkeypatch):
    """A check that compiles takes seconds: 150 checks can outlast the budget, so time counts as well."""
    clock = [100.0]
    monkeypatch.setattr("pt2doctor.reduce.program.time.monotonic", lambda: clock[0])
    reduction = ProgramReduction(Oracle(), SOURCE, 600.0, Quiet(), patience=150, patience_s=60.0)  # type: ignore[arg-type]
    assert reduction(SOURCE)
    clock[0] += 59.0
    assert not reduction("import torch\ntorch.compile(len)\n")  # 59 s without a smaller program: goes on
    clock[0] += 2.0
    with pytest.raises(StopReduction):
        reduction("import torch\ntorch.compile(len)\nw = 4\n")
    assert reduction.stopped == "no_progress" and reduction.checks == 2


def test_a_reduction_stopped_at_its_budget_says_so_in_the_repros_docstring(tmp_path):
    """A repro.py whose reduction ran out of time may keep a line it does not need: its reader is told."""
    from pathlib import Path

    from pt2doctor.reduce.program import ProgramJob, _header

    script = Path(tmp_path / "prog.py")
    script.write_text(SOURCE)
    job = ProgramJob(script, (), "AssertionError: ", "eager", tmp_path, 0.0, 60.0, type_only=True)
    reduction = ProgramReduction(Oracle(), SOURCE, -1.0, Quiet())  # type: ignore[arg-type]  # spent before it starts
    with pytest.raises(StopReduction):
        reduction(SOURCE)
    assert reduction.stopped == "budget"
    assert _header(job, reduction, in_source=False).startswith(
        '"""prog.py, reduced by pt2doctor (5 -> 5 lines, stopped at its time budget: a line left may not be needed).')

"""What a workaround costs in steady state: each call of every torch.compile'd callable timed in the child (an
observer: the script prints and returns what it would), and the compiled regions' time past their first calls."""

from __future__ import annotations

import math
from pathlib import Path

from pt2doctor.capture.runner import SilentReporter
from pt2doctor.diagnose.runs import ScriptCall, VariantRunner, steady_state_s
from pt2doctor.diagnose.variants import CALL_TIMES, Variant
from pt2doctor.model.child import CallTimes
from pt2doctor.model.diagnosis import WorkaroundCost
from pt2doctor.model.serialize import read_record

SCRIPT = '''\
import torch


@torch.compile(backend="eager")
def f(x):
    return (x.sin() + 1).sum()


class M(torch.nn.Module):
    def forward(self, x):
        return x.cos()


m = torch.compile(M(), backend="eager")
for _ in range(4):
    print(float(f(torch.ones(8))))
m(torch.ones(2))
'''


def test_steady_state_is_each_callables_median_later_call_times_their_number():
    times = CallTimes(((1.0, 0.2, 0.3, 0.1), (0.5,), (2.0, 0.4)))
    assert abs(times.steady_state_s() - (0.2 * 3 + 0.4)) < 1e-9  # a callable that ran once has no steady state
    assert CallTimes(((3.0,),)).steady_state_s() is None and CallTimes().steady_state_s() is None


def test_a_timed_run_times_functions_and_modules_and_prints_what_it_would(tmp_path: Path):
    script = tmp_path / "loop.py"
    script.write_text(SCRIPT)
    runner = VariantRunner(ScriptCall(script, (), tmp_path / "out", 300.0), 2, SilentReporter())
    try:
        timed = runner.submit(Variant("timed", timed=True))
        off = runner.submit(Variant.compilation_off())
        timed_run, off_run = timed.result(), off.result()
    finally:
        runner.close()
    assert timed_run.outcome == "pass" and off_run.outcome == "pass"
    timed_dir, off_dir = runner.run_dir("timed"), runner.run_dir("force_eager")
    recorded = read_record(timed_dir / CALL_TIMES, CallTimes)
    assert [len(c) for c in recorded.calls] == [4, 1]  # f four times, the module once
    assert steady_state_s(timed_dir) is not None and steady_state_s(off_dir) is not None  # compilation off: timed too
    printed = (Path(timed_run.run_dir) / "stdout.txt").read_text().splitlines()
    assert len(printed) == 4 and all(abs(float(line) - (math.sin(1.0) + 1) * 8) < 1e-4 for line in printed)


def test_the_cost_says_steady_state_first_and_why_it_was_not_measured():
    measured = WorkaroundCost(9.4, 5.8, steady_s=0.0031, all_eager_steady_s=0.0098)
    assert measured.describe().startswith("compiled regions past their first calls: 3.1 ms with it, 9.8 ms with "
                                          "compilation off; whole runs (")
    unmeasured = WorkaroundCost(9.4, None, steady_note="no compiled function ran more than once")
    assert unmeasured.describe().startswith("steady state not measured (no compiled function ran more than once)")

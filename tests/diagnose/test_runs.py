"""The variant runner: a run that is no longer wanted is stopped, whether it is queued or running."""

from __future__ import annotations

import time

from clihelp import SCRIPTS

from pt2doctor.capture.runner import SilentReporter
from pt2doctor.diagnose.runs import ScriptCall, Variant, VariantRunner


def test_a_running_run_that_is_not_wanted_is_stopped_and_a_queued_one_never_starts(tmp_path):
    runner = VariantRunner(ScriptCall(SCRIPTS / "hang.py", (), tmp_path, timeout_s=120), jobs=1,
                           reporter=SilentReporter())
    try:
        running = runner.submit(Variant.original(1))
        queued = runner.submit(Variant.with_backend("eager"))
        while not (runner.run_dir("original-1") / "child-spec.json").exists():
            time.sleep(0.2)
        started = time.monotonic()
        runner.stop(running)
        runner.stop(queued)
        running.result(timeout=60)
        assert time.monotonic() - started < 30  # not the 120 s timeout
        assert queued.cancelled() and not runner.run_dir("eager").exists()
        assert "original-1" not in runner.finished  # a stopped run is no result
    finally:
        runner.close()

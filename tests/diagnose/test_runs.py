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


def test_only_the_first_run_reads_the_users_autotuning_results_every_later_one_autotunes_anew(tmp_path):
    """Issue 38, point 5: a later run, a warm worker or a verification that read the first run's choice of block size
    would never launch the autotuner's failing trial again. What each run's Inductor says, read inside the run."""
    seen = tmp_path / "seen.txt"
    script = tmp_path / "says.py"
    script.write_text("import torch._inductor.config as c\n"
                      f"open({str(seen)!r}, 'a').write(f'{{c.autotune_local_cache}} {{c.autotune_remote_cache}}\\n')\n")
    runner = VariantRunner(ScriptCall(script, (), tmp_path / "out", timeout_s=120), jobs=1, reporter=SilentReporter())
    try:
        for variant in (Variant.original(1), Variant.original(2), Variant.with_backend("eager")):
            assert runner.submit(variant).result(timeout=120).outcome == "pass"
    finally:
        runner.close()
    first, second, stage = seen.read_text().splitlines()
    assert first.split()[0] == "True"  # the user's own setting, untouched
    assert second == stage == "False False"

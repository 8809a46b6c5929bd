"""How one run of a repro under a release is made and judged (issue 29): `processes.program_run` runs a real
interpreter in a process group of its own, `analysis.run_signature` reads its failure the way every run of
pt2doctor's is judged. Small real programs (no torch needed to show the rules)."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

from pt2doctor.analysis.run_signature import run_signature, uncaught_exception
from pt2doctor.model.signature import FAILURE_MARKER
from pt2doctor.processes.program_run import NOT_STARTED, run_program


def _run(tmp_path: Path, source: str, timeout_s: float = 60, watch=None):
    script = tmp_path / "repro.py"
    script.write_text(textwrap.dedent(source))
    return run_program((sys.executable, script.name), cwd=tmp_path, logs=tmp_path / "logs", timeout_s=timeout_s,
                       watch=watch)


def _signature(tmp_path: Path, source: str) -> str | None:
    ran = _run(tmp_path, source)
    assert ran.returncode is not None
    return run_signature(ran.returncode, ran.stdout, ran.stderr)


def test_a_run_that_exits_zero_passes_and_its_output_is_kept(tmp_path):
    ran = _run(tmp_path, "print('hello')")
    assert ran.returncode == 0 and ran.stdout == "hello\n" and run_signature(0, ran.stdout, ran.stderr) is None


def test_an_uncaught_exception_is_its_type_and_first_line_with_numbers_masked(tmp_path):
    source = """
        def inner():
            raise KeyError("x")
        try:
            inner()
        except KeyError as exc:
            raise ValueError("size 37 does not match 12\\nsecond line") from exc
    """
    assert _signature(tmp_path, source) == "ValueError"  # raised outside the compiler: values left out
    ran = _run(tmp_path, source)
    exception, message, frames = uncaught_exception(ran.stderr) or ("", "", "")
    assert exception == "ValueError" and message == "size 37 does not match 12\nsecond line"
    assert 'line 7, in <module>' in frames and "KeyError" not in frames  # the last traceback only


def test_a_check_whose_line_names_no_values_keeps_it(tmp_path):
    assert _signature(tmp_path, "raise AssertionError('Tensor-likes are not close!\\n\\nMismatched elements: 3 / 4')") \
        == "AssertionError: Tensor-likes are not close!"


def test_an_exception_raised_through_the_compiler_keeps_its_whole_first_line(tmp_path):
    (tmp_path / "torch" / "_inductor").mkdir(parents=True)
    (tmp_path / "torch" / "__init__.py").write_text("")
    (tmp_path / "torch" / "_inductor" / "__init__.py").write_text("def lower():\n"
                                                                  "    raise RuntimeError('op 7 failed')\n")
    assert _signature(tmp_path, "import torch._inductor\ntorch._inductor.lower()") == "RuntimeError: op N failed"


def test_a_repro_that_describes_its_failure_is_judged_by_its_own_words(tmp_path):
    source = (f"import sys\nprint({FAILURE_MARKER!r} + 'AccuracyMismatch: compiled differs', file=sys.stderr)\n"
              "sys.exit(1)")
    assert _signature(tmp_path, source) == "AccuracyMismatch: compiled differs"


def test_a_signal_and_a_bare_exit_status(tmp_path):
    assert _signature(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)") == "SIGSEGV"
    assert _signature(tmp_path, "import sys\nsys.exit(3)") == "exit status 3"


def test_a_run_past_its_timeout_is_stopped_with_what_it_started(tmp_path):
    started = time.monotonic()
    ran = _run(tmp_path, """
        import subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        print("started", flush=True)
        time.sleep(60)
    """, timeout_s=3)
    assert ran.returncode is None and ran.stopped == "timeout" and time.monotonic() - started < 30
    assert ran.stdout == "started\n"


def test_a_watch_that_answers_stops_the_run_with_its_reason(tmp_path):
    seen: list[str] = []

    def watch(stdout: str) -> str:
        seen.append(stdout)
        return "the disk is low" if "working" in stdout else ""

    ran = _run(tmp_path, "import time\nprint('working', flush=True)\ntime.sleep(60)", watch=watch)
    assert ran.stopped == "the disk is low" and ran.returncode is None and any("working" in s for s in seen)


def test_a_program_that_cannot_start_says_why(tmp_path):
    ran = run_program((str(tmp_path / "no-python"), "x.py"), cwd=tmp_path, logs=tmp_path / "logs", timeout_s=10)
    assert ran.returncode == NOT_STARTED and "cannot start" in ran.stderr

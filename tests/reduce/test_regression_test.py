"""A reduced program becomes a regression test in PyTorch's idiom (`reduce.regression_test`): its statements as the
body of `TestRepro.test_repro`, or, where a statement needs module level (a `global`), the program kept whole;
verified in fresh interpreters to fail in a test when compiled and pass with compilation off. A test that fails
only because it cannot import is not verified."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pt2doctor.model.signature import from_signal
from pt2doctor.reduce.program import ProgramJob, program_runs
from pt2doctor.reduce.regression_test import as_a_maintainer_runs_it, verified_test, write_program_test

OFF_BY_ONE = '''"""A backend that adds one to every output."""
import torch


def off_by_one(gm, example_inputs):
    return lambda *args: [t + 1 for t in gm(*args)]


def f(x):
    return x.sin()


x = torch.randn(4)
torch.testing.assert_close(torch.compile(f, backend=off_by_one)(x), f(x))
'''

GLOBAL = OFF_BY_ONE.replace('''def f(x):
    return x.sin()
''', '''calls = 0


def f(x):
    global calls
    calls += 1
    return x.sin() * calls
''').replace("torch.testing.assert_close(torch.compile(f, backend=off_by_one)(x), f(x))",
             "torch.testing.assert_close(torch.compile(f, backend=off_by_one)(x), x.sin())")


def _job(repro: Path) -> ProgramJob:
    return ProgramJob(repro, (), "AssertionError", None, repro.parent, 0.0, 120.0, type_only=True)


def _test_of(tmp_path: Path, program: str) -> Path | None:
    pytest.importorskip("expecttest")  # what torch's test utilities import beyond torch
    pytest.importorskip("numpy")
    repro = tmp_path / "repro.py"
    repro.write_text(program)
    return write_program_test(repro, lambda file: program_runs(_job(repro), file), 120.0)


def _runs(test: Path, compilation_off: bool = False) -> subprocess.CompletedProcess[str]:
    """`python test_repro.py`, as a maintainer runs it; compilation off by torch's own switch (TestCase resets the
    stance before each test, not this)."""
    env = as_a_maintainer_runs_it() | ({"TORCH_COMPILE_DISABLE": "1"} if compilation_off else {})
    return subprocess.run([sys.executable, str(test)], capture_output=True, text=True, timeout=300, cwd=test.parent,
                          env=env)


def test_the_program_becomes_the_body_of_a_test_that_fails_now_and_passes_without_the_bug(tmp_path):
    test = _test_of(tmp_path, OFF_BY_ONE)
    assert test is not None and test.name == "test_repro.py"
    text = test.read_text()
    assert "class TestRepro(TestCase):\n    def test_repro(self):\n        def off_by_one(gm, example_inputs):" in text
    assert "from torch.testing._internal.common_utils import TestCase, run_tests" in text and "run_tests()" in text
    assert "PROGRAM =" not in text
    now = _runs(test)
    assert now.returncode == 1 and "AssertionError" in now.stderr
    assert _runs(test, compilation_off=True).returncode == 0


def test_a_test_is_verified_as_on_a_maintainers_machine_when_pt2doctor_runs_in_ci(tmp_path, monkeypatch):
    """`CI` set (GitHub Actions sets it) sends `run_tests()` to PyTorch's CI reporting, through a module
    (xmlrunner) few machines have: it fails there whatever the bug. The test is verified without it."""
    monkeypatch.setenv("CI", "true")
    test = _test_of(tmp_path, OFF_BY_ONE)
    assert test is not None
    assert _runs(test).returncode == 1 and _runs(test, compilation_off=True).returncode == 0


@pytest.mark.slow  # 26 s; the regression test's other cases stay in the default run
def test_a_program_that_needs_module_level_is_kept_whole(tmp_path):
    test = _test_of(tmp_path, GLOBAL)
    assert test is not None
    text = test.read_text()
    assert "PROGRAM = " in text and "global calls" in text and 'exec(compile(PROGRAM, "repro.py", "exec")' in text
    assert _runs(test).returncode == 1 and _runs(test, compilation_off=True).returncode == 0


def test_a_test_that_fails_because_it_cannot_import_is_not_verified(tmp_path):
    test = tmp_path / "test_repro.py"
    test.write_text("import no_such_module_here\n"
                    "from torch.testing._internal.common_utils import TestCase, run_tests\n")
    assert not verified_test(test, *program_runs(_job(test), test), 120.0)


CRASHES = '''import ctypes

import torch
from torch.testing._internal.common_utils import TestCase, run_tests


def reads_address_zero(gm, example_inputs):
    return lambda *args: ctypes.string_at(0)  # SIGSEGV, as a kernel reading past its buffer does


def f(x):
    return x.sin()


class TestRepro(TestCase):
    def test_compiled_matches_eager(self):
        self.assertEqual(torch.compile(f, backend=reads_address_zero)(torch.ones(2)), f(torch.ones(2)))


if __name__ == "__main__":
    run_tests()
'''


@pytest.mark.slow
def test_a_test_that_dies_of_the_repros_signal_is_verified(tmp_path):
    """A segfault kills the test's process before unittest can print its summary: dying of the repro's own signal
    is the test failing; with no signal named, it is not."""
    pytest.importorskip("expecttest")
    pytest.importorskip("numpy")
    test = tmp_path / "test_repro.py"
    test.write_text(CRASHES)
    runs = program_runs(_job(test), test)
    assert verified_test(test, *runs, 120.0, dies_of=from_signal(signal.SIGSEGV))
    assert not verified_test(test, *runs, 120.0)


ABORTS = '''"""A backend whose compiled code aborts the process."""
import os

import torch


def aborting(gm, example_inputs):
    return lambda *args: os.abort()


def f(x):
    return x.sin()


torch.compile(f, backend=aborting)(torch.randn(4))
'''


def test_a_program_that_kills_its_process_gets_a_test_that_dies_the_same_way(tmp_path):
    """A crash leaves unittest no summary to print: the test is verified by dying of the program's signal."""
    pytest.importorskip("expecttest")
    pytest.importorskip("numpy")
    repro = tmp_path / "repro.py"
    repro.write_text(ABORTS)
    job = ProgramJob(repro, (), "SIGABRT", None, tmp_path, 0.0, 120.0)
    test = write_program_test(repro, lambda file: program_runs(job, file), 120.0, dies_of=job.target)
    assert test is not None and "class TestRepro(TestCase):" in test.read_text()
    assert _runs(test).returncode == -6 and _runs(test, compilation_off=True).returncode == 0

"""Bad input is a usage error (exit 64) that says what is wrong, before the script runs; help is complete."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clihelp import SCRIPTS, pt2doctor

MARKER_SCRIPT = "import pathlib, sys\npathlib.Path(sys.argv[1]).write_text('ran')\n"


@pytest.fixture
def marker_script(tmp_path: Path) -> Path:
    script = tmp_path / "marks.py"
    script.write_text(MARKER_SCRIPT)
    return script


def test_an_out_that_is_a_file_is_refused_before_the_script_runs(tmp_path: Path, marker_script: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_text("")
    for out in (taken, taken / "sub"):
        run = pt2doctor("run", "--out", str(out), str(marker_script), str(tmp_path / "ran"))
        assert run.code == 64 and "is a file" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "ran").exists()


def test_an_option_after_the_script_goes_to_the_script_and_a_note_says_so(tmp_path: Path) -> None:
    """`pt2doctor run SCRIPT --out DIR` hands `--out DIR` to the script (its argv is its own); the user meant
    pt2doctor's --out and found the bundle elsewhere, silently."""
    script = tmp_path / "argv.py"
    script.write_text("import pathlib, sys\npathlib.Path(sys.argv[-1]).write_text(' '.join(sys.argv[1:]))\n")
    mark = tmp_path / "said"
    run = pt2doctor("run", str(script), "--out", str(mark), cwd=tmp_path)
    assert run.code == 0 and mark.read_text() == f"--out {mark}"  # the script got it, untouched
    assert "note: --out after SCRIPT went to the script" in run.stderr and "go before SCRIPT" in run.stderr
    quiet = pt2doctor("run", str(script), "--size", str(mark), cwd=tmp_path)
    assert quiet.code == 0 and "note:" not in quiet.stderr


def test_an_out_that_cannot_be_written_is_refused(marker_script: Path, tmp_path: Path) -> None:
    run = pt2doctor("run", "--out", "/proc/pt2doctor-cannot-be-here", str(marker_script), str(tmp_path / "ran"))
    assert run.code == 64 and "cannot be written" in run.stderr and not (tmp_path / "ran").exists()


@pytest.mark.parametrize(("args", "says"), [
    (("run", "--bogus", str(SCRIPTS / "no_compile.py")), "No such option '--bogus'"),
    (("run", "--tiemout", "5", str(SCRIPTS / "no_compile.py")), "Did you mean '--timeout'?"),  # issue 40, point 5
    (("diagnose", "--budjet=5", str(SCRIPTS / "no_compile.py")), "Did you mean '--budget'?"),
    (("accuracy", "--tol", "-5", str(SCRIPTS / "no_compile.py")), "not in the range"),
    (("accuracy", "--backend", "nosuchbackend", str(SCRIPTS / "no_compile.py")),
     "torch has no backend 'nosuchbackend'"),
    (("minify", "--tolerance", "0", "."), "not in the range"),
])
def test_bad_options_are_usage_errors(args: tuple[str, ...], says: str) -> None:
    run = pt2doctor(*args)
    assert run.code == 64 and says in run.stderr, run.stderr


def test_an_empty_trace_is_not_ok(tmp_path: Path) -> None:
    (tmp_path / "empty.log").write_text("")
    run = pt2doctor("report", str(tmp_path / "empty.log"))
    assert run.code == 64 and "is empty" in run.stderr


def test_a_second_run_on_the_same_out_is_refused_while_the_first_writes(tmp_path: Path) -> None:
    out = tmp_path / "shared"
    first = subprocess.Popen([sys.executable, "-m", "pt2doctor", "run", "--out", str(out), "--timeout", "60",
                              str(SCRIPTS / "hang.py")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while not (out / "trace").exists() and time.time() < deadline:  # the first run has its lock by then
            time.sleep(0.2)
        second = pt2doctor("run", "--out", str(out), str(SCRIPTS / "no_compile.py"))
        assert second.code == 64 and "another pt2doctor run is writing to" in second.stderr
    finally:  # Ctrl-C, so the first run stops its child (a SIGKILL would leave the hanging script behind)
        first.send_signal(signal.SIGINT)
        try:
            first.wait(timeout=30)
        except subprocess.TimeoutExpired:
            first.kill()
            first.wait()


def test_help_is_whole_and_names_exit_codes_and_the_default_run_directory() -> None:
    top = pt2doctor("--help")
    listing = top.stdout.split("Commands:", 1)[1]
    assert top.code == 0 and "..." not in listing  # no summary cut short
    for command in ("run", "accuracy", "explain", "recompiles", "diagnose"):
        text = " ".join(pt2doctor(command, "--help").stdout.split()).replace("- ", "-")
        assert "Exit status" in text and "pt2doctor-runs/SCRIPT-" in text, command
    for command in ("run", "diagnose"):  # the job forms and where pt2doctor's options go (issue 40, point 3)
        text = " ".join(pt2doctor(command, "--help").stdout.split())
        assert "options go before SCRIPT" in text and "-- torchrun [TORCHRUN FLAGS] SCRIPT [ARGS]" in text, command
    assert "--tol, --tolerance" in pt2doctor("minify", "--help").stdout
    assert "--tol, --tolerance" in pt2doctor("accuracy", "--help").stdout

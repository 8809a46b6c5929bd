"""`verify` runs a repro in several fresh interpreters side by side and counts those that fail the same
way: only every time is verified; some of the time is flaky, with the rate (issue 30: a repro verified
once, of a backend failing about half of its runs, was reported as a deterministic bug)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from pt2doctor.model.minify import FailureKind, FailureSignature
from pt2doctor.processes.fresh import verify

# Every other run fails: the runs take turns through a counter file, under a lock.
_ALTERNATING = textwrap.dedent("""\
    import fcntl, pathlib, sys, time
    counter = pathlib.Path(__file__).with_name("count")
    with open(counter, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        n = int(f.read() or 0) + 1
        f.seek(0)
        f.truncate()
        f.write(str(n))
    time.sleep(0.5)  # the runs overlap: they start side by side
    sys.exit(3 if n % 2 else 0)
""")
TARGET = FailureSignature(FailureKind.EXCEPTION, "exit status 3")


def _script(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "repro.py"
    path.write_text(text)
    return path


def test_a_repro_failing_every_other_run_is_flaky_with_its_rate(tmp_path):
    result = verify(_script(tmp_path, _ALTERNATING), TARGET, timeout_s=60, runs=2)
    assert (result.runs.failed, result.runs.runs) == (1, 2)
    assert result.runs.flaky and not result.verified
    assert result.returncode == 0 and result.seen is None  # the run that did not fail is the one described
    assert str(result.runs) == "failed the same way in 1/2 runs"


def test_a_repro_failing_every_run_is_verified(tmp_path):
    result = verify(_script(tmp_path, "import sys\nsys.exit(3)\n"), TARGET, timeout_s=60, runs=3)
    assert result.verified and (result.runs.failed, result.runs.runs) == (3, 3) and not result.runs.flaky
    assert result.seen == TARGET


# Fails (exit status 3) only when another run of it is running: a program that holds most of a GPU.
_ALONE_OR_NOT = textwrap.dedent("""\
    import os, pathlib, sys, time
    marker = pathlib.Path(__file__).with_name("running")
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        sys.exit(4)
    time.sleep(0.5)
    os.close(fd)
    marker.unlink()
    sys.exit(3)
""")


def test_runs_that_cannot_share_the_machine_go_one_at_a_time(tmp_path):
    script = _script(tmp_path, _ALONE_OR_NOT)
    assert verify(script, TARGET, timeout_s=60, runs=3, at_once=1).verified
    assert not verify(script, TARGET, timeout_s=60, runs=3).verified  # side by side, all but one exit 4


def test_a_repro_that_never_fails_is_neither(tmp_path):
    result = verify(_script(tmp_path, "print('fine')\n"), TARGET, timeout_s=60, runs=2)
    assert not result.verified and not result.runs.flaky and result.runs.failed == 0


def test_a_file_killed_at_its_timeout_takes_what_it_started_with_it(tmp_path: Path) -> None:
    """`run_file` kills the process group: a grandchild (as Inductor's compile workers are) does not outlive it."""
    import os
    import time

    from pt2doctor.processes.fresh import run_file

    pid_file = tmp_path / "grandchild.pid"
    script = tmp_path / "spawns.py"
    script.write_text(textwrap.dedent(f"""\
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        time.sleep(600)
        """))
    ran = run_file(script, timeout_s=3.0)
    assert ran.timed_out and ran.returncode is None
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the grandchild {grandchild} outlived the timeout")


def test_a_file_runs_in_its_own_folder_and_says_how_it_ended(tmp_path: Path) -> None:
    from pt2doctor.processes.fresh import run_file

    (tmp_path / "data.txt").write_text("beside it")
    script = tmp_path / "reads.py"
    script.write_text("import sys\nprint(open('data.txt').read())\nsys.exit(3)\n")
    ran = run_file(script, timeout_s=30.0)
    assert (ran.returncode, ran.stdout.strip(), ran.timed_out) == (3, "beside it", False)


def test_a_lowered_priority_lowers_the_sessions_autogroup_too(tmp_path):
    """Linux shares the CPU between sessions (autogroups) first, and every child of ours leads its own: nice alone
    would not make the verifying interpreter's imports yield to the user's first run. The autogroup's nice follows."""
    import os
    import sys

    from pt2doctor.processes import launch
    from pt2doctor.processes.group import set_priority_source

    code = set_priority_source() + "\nset_priority(7)\nimport os\nprint(os.getpriority(os.PRIO_PROCESS, 0))\n" \
        "print(open('/proc/self/autogroup').read() if os.path.exists('/proc/self/autogroup') else 'nice 7')\n"
    ran = launch.run([sys.executable, "-c", code], timeout_s=60, cwd=tmp_path)
    nice, autogroup = ran.stdout.splitlines()[:2]
    assert ran.returncode == 0 and nice == "7" and autogroup.endswith("nice 7"), ran
    assert os.getpriority(os.PRIO_PROCESS, 0) == 0  # ours is untouched: the child led a session of its own

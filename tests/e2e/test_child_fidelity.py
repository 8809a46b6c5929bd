"""Under `pt2doctor run` the script sees and prints what `python SCRIPT` gives it: argv as typed, and a
traceback that starts at the script's own first frame (no pt2doctor or runpy frames above it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from clihelp import pt2doctor

SCRIPT = """\
import sys
print("argv0", sys.argv[0], "file", __file__)
def f():
    raise ValueError("boom")
f()
"""


def test_argv_and_traceback_are_as_python_gives_them(tmp_path: Path) -> None:
    (tmp_path / "tb.py").write_text(SCRIPT)
    plain = subprocess.run([sys.executable, "tb.py"], capture_output=True, text=True, cwd=tmp_path)
    run = pt2doctor("run", "--out", "out", "tb.py", cwd=tmp_path)
    assert run.code == plain.returncode == 1
    assert run.stdout.splitlines()[0] == plain.stdout.splitlines()[0]  # argv0 tb.py file /abs/tb.py
    traceback = run.stderr[run.stderr.index("Traceback"):run.stderr.index("ValueError: boom") + len("ValueError: boom")]
    assert traceback == plain.stderr.strip()
    assert "runpy" not in run.stderr and "capture/child" not in run.stderr
    failure = run.out_dir.joinpath("session.json").read_text()
    assert "capture/child.py" not in failure and "<frozen runpy>" not in failure

"""Background work's priority (`launch.Priority`): a child given it runs at a low priority with its whole session (what
it starts later shares it), until it is awaited and `urgent()` gives it normal priority again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pt2doctor.processes import launch
from pt2doctor.processes.group import BACKGROUND_NICE, kill_group


def _nice(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rfind(")") + 2:].split()[16])  # field 19: nice


def _autogroup(pid: int) -> str:
    path = Path(f"/proc/{pid}/autogroup")
    return path.read_text().strip() if path.exists() else f"nice {_nice(pid)}"


def _may_raise_priority() -> bool:
    """Whether this process may give a child back a higher priority (privileges, or RLIMIT_NICE)."""
    import resource

    return os.geteuid() == 0 or resource.getrlimit(resource.RLIMIT_NICE)[0] >= 20


def test_a_background_child_and_what_it_starts_yield_until_it_is_awaited(tmp_path: Path) -> None:
    # the child starts a grandchild only once told to (a line on its stdin): after it was lowered
    code = ("import subprocess, sys\nsys.stdin.readline()\n"
            "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "print(g.pid, flush=True)\nsys.stdin.readline()\n")
    child = launch.start([sys.executable, "-c", code], cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    priority = launch.Priority()
    try:
        assert priority.background
        priority.watch(child.pid)
        assert _nice(child.pid) == BACKGROUND_NICE and _autogroup(child.pid).endswith(f"nice {BACKGROUND_NICE}")
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write("start\n")
        child.stdin.flush()
        grandchild = int(child.stdout.readline())
        assert _nice(grandchild) == BACKGROUND_NICE and os.getsid(grandchild) == child.pid  # in the lowered session
        assert os.getpriority(os.PRIO_PROCESS, 0) == 0  # ours is untouched
        priority.urgent()
        assert not priority.background
        if _may_raise_priority():
            assert _nice(child.pid) == 0 and _autogroup(child.pid).endswith("nice 0")
        late = launch.start([sys.executable, "-c", "import time; time.sleep(60)"], cwd=tmp_path)
        priority.watch(late.pid)  # watched once urgent: left at normal priority
        assert _nice(late.pid) == 0
        kill_group(late.pid)
        late.wait()
    finally:
        kill_group(child.pid)
        child.wait()

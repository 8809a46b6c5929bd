"""Fresh runs forked after `import torch` (`processes.fresh_forks`): each ends as `python FILE` would (its exit
status, its signal, its output), runs from its own folder with its name as argv, sees the environment it is given,
is killed at its timeout, and verifies a repro as a new interpreter does. One server serves the module."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pt2doctor.model.minify import FailureKind, FailureSignature
from pt2doctor.processes.fresh import verify
from pt2doctor.processes.fresh_forks import FreshForks


@pytest.fixture(scope="module")
def forks(tmp_path_factory: pytest.TempPathFactory):
    server = FreshForks(tmp_path_factory.mktemp("fresh"))
    yield server
    server.close()


def _file(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def test_a_forked_run_ends_as_python_file_would(forks: FreshForks, tmp_path: Path):
    ok = forks.run(_file(tmp_path, "ok.py", "import os, sys\nprint(os.getcwd(), sys.path[0])\n"), 60)
    assert ok is not None and ok.returncode == 0 and ok.stdout.split() == [str(tmp_path), str(tmp_path)]
    raised = forks.run(_file(tmp_path, "raises.py", "raise RuntimeError('boom')\n"), 60)
    assert raised is not None and raised.returncode == 1 and "RuntimeError: boom" in raised.stderr
    exited = forks.run(_file(tmp_path, "exits.py", "import sys\nsys.exit(3)\n"), 60)
    assert exited is not None and exited.returncode == 3
    killed = forks.run(_file(tmp_path, "segv.py", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"), 60)
    assert killed is not None and killed.returncode == -11


def test_a_forked_run_gets_its_environment_and_is_stopped_at_its_timeout(forks: FreshForks, tmp_path: Path):
    env = forks.run(_file(tmp_path, "env.py", "import os\nprint(os.environ.get('ONLY_HERE'))\n"), 60,
                    env={"ONLY_HERE": "yes", "PATH": "/usr/bin"})
    assert env is not None and env.stdout.strip() == "yes"
    hangs = forks.run(_file(tmp_path, "hangs.py", "import time\ntime.sleep(600)\n"), 1.0)
    assert hangs is not None and hangs.returncode is None


def test_runs_from_several_threads_at_once_each_get_their_own_outcome(forks: FreshForks, tmp_path: Path):
    paths = [_file(tmp_path, f"n{i}.py", f"import sys, time\ntime.sleep(0.3)\nsys.exit({i})\n") for i in range(4)]
    codes: dict[int, int | None] = {}

    def run(i: int) -> None:
        ran = forks.run(paths[i], 60)
        codes[i] = ran.returncode if ran is not None else None

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert codes == {0: 0, 1: 1, 2: 2, 3: 3}


def test_verify_counts_forked_runs_as_it_counts_fresh_interpreters(forks: FreshForks, tmp_path: Path):
    repro = _file(tmp_path, "repro.py", "import torch\nprint('PT2DOCTOR REPRO FAILED: ValueError: bad', flush=True)\n"
                                        "raise SystemExit(1)\n")
    verified = verify(repro, FailureSignature(FailureKind.EXCEPTION, "ValueError: bad"), timeout_s=120, runs=2,
                      forks=forks)
    assert verified.verified and (verified.runs.failed, verified.runs.runs) == (2, 2)


def test_a_server_that_ended_runs_nothing_and_says_so(tmp_path: Path):
    server = FreshForks(tmp_path / "fresh")
    server.close()
    assert server.run(_file(tmp_path, "x.py", "pass\n"), 10) is None


def test_a_forked_run_autotunes_anew(forks: FreshForks, tmp_path: Path):
    """A verification does not read an earlier one's autotuning results (issue 38, point 5), as on a machine that
    never ran the kernels; the fresh interpreter `verify` falls back to does the same."""
    says = _file(tmp_path, "says.py", "import torch._inductor.config as c\nprint(c.autotune_local_cache)\n")
    ran = forks.run(says, 60)
    assert ran is not None and ran.stdout.strip() == "False"
    fresh = verify(says, FailureSignature(FailureKind.EXCEPTION, "Nothing: never"), runs=1)
    assert fresh.runs.failed == 0 and "False" in fresh.output_tail

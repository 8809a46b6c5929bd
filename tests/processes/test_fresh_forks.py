"""Fresh runs forked after `import torch` (`processes.fresh_forks`): each ends as `python FILE` would (its exit
status, its signal, its output), runs from its own folder with its name as argv, sees the environment it is given,
is killed at its timeout, and verifies a repro as a new interpreter does. One server serves the module."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from pt2doctor.capture.bytecode_cache import worker_env
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


def test_a_server_stopped_from_outside_refuses_at_once(tmp_path: Path):
    """A stop signals every child, the server among them: a run asked for after that is refused at once, not after
    the minute an answer is waited for (a stopped diagnosis would wait that long to end)."""
    server = FreshForks(tmp_path / "fresh")
    try:
        assert server.wait_ready(120)
        os.kill(server._proc.pid, signal.SIGTERM)  # type: ignore[union-attr]
        while server.alive:
            time.sleep(0.05)
        time.sleep(0.5)  # the server's output has been read to its end
        started = time.monotonic()
        assert server.start_module("json.tool", ["--help"], env=dict(os.environ), cwd=tmp_path,
                                   out=tmp_path / "out", err=tmp_path / "err") is None
        assert time.monotonic() - started < 5
    finally:
        server.close()


def test_a_forked_run_autotunes_anew(forks: FreshForks, tmp_path: Path):
    """A verification does not read an earlier one's autotuning results (issue 38, point 5), as on a machine that
    never ran the kernels; the fresh interpreter `verify` falls back to does the same."""
    says = _file(tmp_path, "says.py", "import torch._inductor.config as c\nprint(c.autotune_local_cache)\n")
    ran = forks.run(says, 60)
    assert ran is not None and ran.stdout.strip() == "False"
    fresh = verify(says, FailureSignature(FailureKind.EXCEPTION, "Nothing: never"), runs=1)
    assert fresh.runs.failed == 0 and "False" in fresh.output_tail


def _program(forks: FreshForks, module: str, args: tuple[str, ...], cwd: Path, env: dict[str, str]
             ) -> tuple[int, str, str]:
    out, err = cwd / f"{module}.out", cwd / f"{module}.err"
    proc = forks.start_module(module, args, env=env, cwd=cwd, out=out, err=err)
    assert proc is not None
    code = proc.wait(timeout=120)
    return code, out.read_text(), err.read_text()


def test_a_forked_program_starts_as_python_m_would(forks: FreshForks, tmp_path: Path):
    """`python -m MODULE ARGS` from the server: its argv, working directory, import path (PYTHONPATH's entries after
    the directory), environment, an exit status of its own, its atexit handlers run at the end, and Python's `random`
    seeded anew in each (as an interpreter's start seeds it), not the server's state twice."""
    assert forks.wait_ready(300)
    lib, cwd = tmp_path / "lib", tmp_path / "cwd"
    lib.mkdir()
    cwd.mkdir()
    _file(lib, "prog.py", "import atexit, os, random, sys\n"
                          "print(sys.argv[1:], os.getcwd(), sys.path[0], sys.path[1], os.environ['ONLY_HERE'])\n"
                          "print(random.random())\n"
                          "atexit.register(print, 'at exit')\n"
                          "sys.exit(4)\n")
    env = {**worker_env(), "PYTHONPATH": str(lib), "ONLY_HERE": "yes"}
    runs = [_program(forks, "prog", ("a", "b"), cwd, env) for _ in range(2)]
    (code, out, _), (_, again, _) = runs
    first, drawn, end = out.splitlines()
    assert code == 4 and end == "at exit"
    assert first == f"['a', 'b'] {cwd} {cwd} {lib} yes"
    assert drawn != again.splitlines()[1]


def test_a_forked_program_gets_the_descriptors_it_is_handed_as_its_stdin_and_stdout(forks: FreshForks, tmp_path: Path):
    """pt2doctor's own warm processes forked there (the worker pool's zygote, the bisector) talk through pipes: their
    ends are handed over with the request; one file for stdout and stderr is one descriptor, as `2>&1` makes."""
    assert forks.wait_ready(300)
    _file(tmp_path, "echo.py", "import sys\nline = sys.stdin.readline()\nprint(line.upper(), end='', flush=True)\n"
                               "print('to stderr', file=sys.stderr)\n")
    (their_in, our_in), (our_out, their_out) = os.pipe(), os.pipe()
    log = tmp_path / "echo.log"
    forked = forks.start_module("echo", (), env={**worker_env(), "PYTHONPATH": str(tmp_path)}, cwd=tmp_path, out=log,
                                err=log, stdin=their_in, stdout=their_out)
    os.close(their_in)
    os.close(their_out)
    assert forked is not None
    with os.fdopen(our_in, "w") as to_it, os.fdopen(our_out) as from_it:
        to_it.write("a line\n")
        to_it.flush()
        assert from_it.readline() == "A LINE\n"
        assert forked.wait(60) == 0
        assert from_it.read() == ""  # its end of the pipe closed with it: no copy of it stayed in the server
    assert log.read_text() == "to stderr\n"


def test_a_forked_program_writes_the_structured_trace_its_environment_names(forks: FreshForks, tmp_path: Path):
    """TORCH_TRACE is read by torch on its import, in the server: each program's own is set up again."""
    assert forks.wait_ready(300)
    _file(tmp_path, "compiles.py", "import torch\ntorch.compile(lambda x: x + 1, backend='eager')(torch.ones(2))\n")
    trace = tmp_path / "trace"
    code, _, err = _program(forks, "compiles", (), tmp_path,
                            {**worker_env(), "PYTHONPATH": str(tmp_path), "TORCH_TRACE": str(trace)})
    assert code == 0, err
    assert any("dynamo_start" in f.read_text() for f in trace.glob("*.log"))


def test_a_program_forks_only_where_its_environment_is_the_servers_but_for_what_a_fork_sets_again(
        forks: FreshForks):
    server = dict(forks.environment)
    assert forks.forks_for({**server, "TORCH_TRACE": "/x", "PYTHONPATH": "/y"})
    assert forks.forks_for({**server, "TORCHINDUCTOR_CACHE_DIR": "/tmp/c"}) == ("TORCHINDUCTOR_CACHE_DIR" not in server)
    assert not forks.forks_for({**server, "TORCHINDUCTOR_FREEZING": "1"})

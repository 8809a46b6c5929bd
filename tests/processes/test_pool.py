"""The worker pool's isolation contract, both ways it runs candidates (forked children; warm servers,
the GPU way, asked for here): a candidate that crashes or hangs takes
only itself with it, and the pool keeps answering afterwards."""

import os
import signal
import time

import pytest

from pt2doctor.processes.pool import RunResult, WorkerPool, WorkerPoolError

HEADER = "import os, time\ndef describe_failure(exc):\n    return f'{type(exc).__name__}: {exc}'\n"
OK = HEADER + "def check():\n    pass\n"
FAILS = HEADER + "def check():\n    raise ValueError('boom')\n"
ABORTS = HEADER + "def check():\n    os.abort()\n"
HANGS = HEADER + "def check():\n    time.sleep(600)\n"
# A candidate may change global state; in a reused server the next one must not see it.
SETS_CONFIG = HEADER + "import torch._inductor.config as c\nc.max_autotune = True\ndef check():\n    pass\n"
READS_CONFIG = HEADER + "import torch._inductor.config as c\ndef check():\n    assert not c.max_autotune, 'leaked'\n"
# Every candidate autotunes anew: none reads the block size an earlier one's autotuner chose (issue 38, point 5).
AUTOTUNES_ANEW = HEADER + ("import torch._inductor.config as c\n"
                           "def check():\n    assert not (c.autotune_local_cache or c.autotune_remote_cache)\n")


@pytest.fixture(scope="module", params=["forks", "servers"])
def pool(request):
    with WorkerPool(2, timeout_s=4.0, servers=request.param == "servers") as workers:
        yield workers


def test_crash_and_hang_take_only_their_candidate(pool):
    results = pool.run([OK, FAILS, ABORTS, HANGS])
    assert results == [
        RunResult("ok"), RunResult("failed", "ValueError: boom"), RunResult("signal", "6"), RunResult("timeout"),
    ]
    # The workers that died or were killed were replaced: the pool still answers, in order.
    assert pool.run([FAILS, OK, OK]) == [RunResult("failed", "ValueError: boom"), RunResult("ok"), RunResult("ok")]


def test_a_candidate_never_sees_the_config_another_one_set(pool):
    assert pool.run([SETS_CONFIG, SETS_CONFIG]) == [RunResult("ok")] * 2
    assert pool.run([READS_CONFIG, READS_CONFIG]) == [RunResult("ok")] * 2
    assert pool.run([AUTOTUNES_ANEW, AUTOTUNES_ANEW]) == [RunResult("ok")] * 2


def test_servers_that_never_warm_up_answer_with_the_reason():
    env = {"PT2DOCTOR_SERVER_WARM_UP_TIMEOUT": "0.2"}  # nothing imports torch that fast
    with WorkerPool(1, timeout_s=4.0, servers=True, env=env) as pool:
        (result,) = pool.run([OK])
    assert result.status == "error" and "did not warm up in 0.2 s" in result.text


def test_a_pool_closed_while_it_warms_up_is_ended_not_waited_for():
    """A diagnosis stopped (its --budget, SIGTERM) during the first run closes workers still importing torch: they
    would read the request to quit only once warm (seconds on a busy machine, all of it past the budget)."""
    pool = WorkerPool(1, timeout_s=4.0)
    pool.close()
    assert pool._proc is not None and pool._proc.returncode == -9  # killed, not asked and waited for


# A candidate that holds something until it is collected (a module-level cycle: most of a GPU, in a program);
# the next candidate in the same server runs only once it is released.
HOLDS = HEADER + """import pathlib
class Held:
    def __init__(self):
        self.cycle = self
    def __del__(self):
        pathlib.Path(os.environ["RELEASED"]).write_text("released")
held = Held()
def check():
    pass
"""
SEES_IT_RELEASED = HEADER + "import pathlib\ndef check():\n    assert pathlib.Path(os.environ['RELEASED']).exists()\n"


def test_what_a_candidate_held_is_released_before_the_next_runs_in_the_same_server(tmp_path):
    with WorkerPool(1, timeout_s=60.0, servers=True, env={"RELEASED": str(tmp_path / "released")}) as pool:
        assert pool.run([HOLDS]) == [RunResult("ok")]
        assert pool.run([SEES_IT_RELEASED]) == [RunResult("ok")]


def test_a_candidate_that_imported_a_module_of_the_programs_own_leaves_no_patch_behind(tmp_path):
    """A program's own module may patch torch on import (a plugin, a planted bug); a later candidate that no
    longer imports it must not see the patch, which the server cannot undo: that server is not reused."""
    (tmp_path / "patches_json.py").write_text("import json\njson.PATCHED = True\n")
    imports = (HEADER + f"import sys\nsys.path.insert(0, {str(tmp_path)!r})\nimport patches_json\n"
               + "def check():\n    pass\n")
    unpatched = HEADER + "import json\ndef check():\n    assert not hasattr(json, 'PATCHED'), 'patched'\n"
    with WorkerPool(1, timeout_s=60.0, servers=True) as pool:
        assert pool.run([imports]) == [RunResult("ok")]
        assert pool.run([unpatched, OK]) == [RunResult("ok")] * 2


WAIT_POLICY = HEADER + "def check():\n    raise ValueError(os.environ.get('OMP_WAIT_POLICY'))\n"


def test_candidates_threads_wait_passively_unless_the_user_chose_a_policy():
    """How OpenMP's threads wait between kernels: spinning burns the cores the other candidates and the program's
    runs need; the user's own choice stands."""
    with WorkerPool(1, timeout_s=30.0) as pool:
        assert pool.run([WAIT_POLICY]) == [RunResult("failed", "ValueError: PASSIVE")]
    with WorkerPool(1, timeout_s=30.0, env={"OMP_WAIT_POLICY": "ACTIVE"}) as pool:
        assert pool.run([WAIT_POLICY]) == [RunResult("failed", "ValueError: ACTIVE")]


def test_a_zygote_forked_on_a_fresh_forks_server_isolates_candidates_as_a_new_one_does(tmp_path):
    """In a diagnosis the zygote is forked on the fresh-forks server once its imports are done (one interpreter's
    warm-up serves both); where the server cannot fork it (it ended), it starts as a new interpreter."""
    from pathlib import Path

    from pt2doctor.processes.fresh_forks import FreshForks

    server = FreshForks(tmp_path / "fresh", urgent=True)
    try:
        with WorkerPool(2, timeout_s=4.0, host=server) as pool:
            assert pool.run([OK, FAILS, ABORTS, HANGS]) == [
                RunResult("ok"), RunResult("failed", "ValueError: boom"), RunResult("signal", "6"),
                RunResult("timeout")]
            stat = Path(f"/proc/{pool._pid}/stat").read_text()
            assert int(stat[stat.rfind(")") + 2:].split()[1]) == server._proc.pid  # the server is its parent
    finally:
        server.close()
    with WorkerPool(1, timeout_s=30.0, host=server) as pool:  # ended: a new interpreter instead
        assert pool.run([OK]) == [RunResult("ok")]


def test_a_pool_closed_before_its_host_is_ready_starts_no_zygote_and_does_not_wait(tmp_path):
    """A diagnosis whose first run passed ends at once: the pool is closed while the fresh-forks server still imports
    torch; nothing waits for the server, and no zygote is started on it or anew."""
    import time

    from pt2doctor.processes.fresh_forks import FreshForks

    server = FreshForks(tmp_path / "fresh", urgent=True)
    try:
        pool = WorkerPool(2, timeout_s=4.0, host=server)
        started = time.monotonic()
        pool.close()
        assert time.monotonic() - started < 1.0
        assert server.wait_ready(300)  # the server goes on to its end; the pool's start thread sees the pool closed
        time.sleep(1.0)
        assert pool._pid < 0 or not _alive(pool._pid)
    finally:
        server.close()


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not)."""
    from pathlib import Path

    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_run_until_cancels_what_is_no_longer_wanted_and_the_pool_answers_on(pool):
    """Once `decided` holds, the candidates still running are ended (a forked child; a server's is left to end and
    its late answer dropped) and the pool's next batch gets its own answers only."""
    slow = HEADER + "def check():\n    time.sleep(2.0)\n"
    started = time.monotonic()
    results = pool.run_until([FAILS, slow], lambda answers: answers[0] is not None)
    assert results == [RunResult("failed", "ValueError: boom"), None]
    assert time.monotonic() - started < 1.5  # not waited for
    assert pool.run([OK, FAILS]) == [RunResult("ok"), RunResult("failed", "ValueError: boom")]


def test_a_pool_whose_zygote_ended_says_so_as_a_pool_error_when_asked_again(tmp_path):
    """A zygote that ended (killed here; in a corpus run it exited with status 1) leaves its request pipe without a
    reader: the next run raises `WorkerPoolError`, which the diagnosis's steps treat as the workers' end (the control
    says it could not run), not `BrokenPipeError`, which ended the control step with pt2doctor's own error (exit 70)."""
    with WorkerPool(1, timeout_s=60) as dead:
        assert dead.run([OK])[0].status == "ok"
        os.kill(dead._pid, signal.SIGKILL)
        with pytest.raises(WorkerPoolError):
            dead.run([OK])


def test_a_candidate_cancelled_in_the_round_that_saw_its_end_is_not_read_again():
    """The zygote's selector can return, in one round, the request pipe (a `Cancel` for a candidate, which reaps it)
    before that candidate's own end: its event is then stale, and reading it ended the zygote with a KeyError (exit
    status 1: the minifier, the control and the program reducer of two corpus bugs lost their workers)."""
    from pt2doctor.processes.forks import Forks
    from pt2doctor.processes.protocol import RunJob

    answers_r, answers_w = os.pipe()
    forks = Forks(1, answers_w)
    try:
        forks.pending.append(RunJob(0, "def check():\n    pass\n", 30.0, "repro.py"))
        forks.dispatch()
        (pid,) = forks.children
        time.sleep(1.0)  # the candidate has ended: its pipe is at its end
        forks.cancel({0})  # the Cancel, read first in the round
        forks.readable(pid)  # that candidate's end, seen in the same round
        assert not forks.children
    finally:
        forks.shutdown()
        os.close(answers_r)
        os.close(answers_w)

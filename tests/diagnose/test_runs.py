"""The variant runner: a run that is no longer wanted is stopped, whether it is queued or running."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from clihelp import SCRIPTS

from pt2doctor.capture.runner import SilentReporter
from pt2doctor.diagnose.aot_cache import keeps_aot_cache
from pt2doctor.diagnose.forking import sets_environment
from pt2doctor.diagnose.gpu_share import GpuShare
from pt2doctor.diagnose.runs import ScriptCall, VariantRunner, run_a_copy
from pt2doctor.diagnose.variants import Variant
from pt2doctor.processes import launch
from pt2doctor.processes.fresh_forks import FreshForks

HERE = Path(__file__).parent


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


def test_a_run_started_ahead_yields_until_the_step_that_wants_it_submits_it_and_one_not_wanted_is_stopped(tmp_path):
    """Issue 38: a run a later step will likely want (the stage's backend beside the settings search) starts ahead, at
    low priority; that step's submit of the same variant gets that run, at normal priority from then on."""
    from pt2doctor.processes.group import BACKGROUND_NICE

    script = tmp_path / "waits.py"
    script.write_text("import os, sys, time\nfrom pathlib import Path\nhere = Path(sys.argv[1])\n"
                      "(here / f'{sys.argv[2]}.pid').write_text(str(os.getpid()))\n"
                      "while not (here / 'go').exists():\n    time.sleep(0.05)\n")

    def nice(pid_file: Path) -> int:
        stat = Path(f"/proc/{pid_file.read_text()}/stat").read_text()
        return int(stat[stat.rfind(")") + 2:].split()[16])

    def started(name: str) -> Path:
        pid_file, deadline = tmp_path / f"{name}.pid", time.monotonic() + 120
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        return pid_file

    runner = VariantRunner(ScriptCall(script, (str(tmp_path), "wanted"), tmp_path / "out", timeout_s=120), jobs=1,
                           reporter=SilentReporter())
    try:
        runner.ahead(Variant("ahead"))
        pid_file = started("wanted")
        deadline = time.monotonic() + 10
        while nice(pid_file) != BACKGROUND_NICE and time.monotonic() < deadline:  # lowered once it is watched
            time.sleep(0.05)
        assert nice(pid_file) == BACKGROUND_NICE
        wanted = runner.submit(Variant("ahead"))  # the same run, not a second one
        if os.geteuid() == 0:  # raising a priority again needs privileges
            assert nice(pid_file) == 0
        (tmp_path / "go").write_text("")
        attempt = wanted.result(timeout=120)
        assert (attempt.outcome, attempt.ahead, attempt.label) == ("pass", True, "ahead")
        assert [m.label for m in runner.made] == ["ahead"]
    finally:
        runner.close()
    (tmp_path / "go").unlink()
    runner = VariantRunner(ScriptCall(script, (str(tmp_path), "unwanted"), tmp_path / "out2", timeout_s=120), jobs=1,
                           reporter=SilentReporter())
    try:
        runner.ahead(Variant("ahead"))
        started("unwanted")
        runner.drop_ahead()
        runner.wait_ended(60)
        assert "ahead" not in runner.finished and [m.wanted for m in runner.made] == [False]
    finally:
        runner.close()


def test_a_copy_run_ahead_is_taken_by_run_a_copy_of_the_same_text_and_stopped_for_another(tmp_path):
    """Issue 38: the first workaround's copy starts ahead once the minifier's first cut names the culprit
    (`workarounds.start_call`); `run_a_copy` of the same copy takes that run, and of another text in that folder stops
    it before writing the folder again."""
    script = tmp_path / "prog.py"
    script.write_text("print('as written')\n")
    waits = ("import sys, time\nfrom pathlib import Path\nhere = Path(sys.argv[1])\n"
             "(here / 'ahead.started').write_text('')\nwhile not (here / 'go').exists():\n    time.sleep(0.05)\n")
    runner = VariantRunner(ScriptCall(script, (str(tmp_path),), tmp_path / "out", timeout_s=120), jobs=1,
                           reporter=SilentReporter())
    folder = tmp_path / "out" / "workaround" / "call"
    try:
        runner.copy_ahead(folder, "workaround-call", waits)
        deadline = time.monotonic() + 120
        while not (tmp_path / "ahead.started").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        (tmp_path / "go").write_text("")
        attempt, copy_runner = run_a_copy(runner, folder, "workaround-call", waits)
        assert (attempt.outcome, attempt.ahead) == ("pass", True)  # the run ahead, not a second one
        assert [(m.step, m.label, m.wanted) for m in runner.made] == [("workarounds", "workaround-call", True)]
        assert "workaround-call" in copy_runner.sessions

        (tmp_path / "go").unlink()
        (tmp_path / "ahead.started").unlink()
        runner.copy_ahead(folder, "workaround-call", waits)
        while not (tmp_path / "ahead.started").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        other = "print('the minimal graph named another call')\n"
        attempt, _ = run_a_copy(runner, folder, "workaround-call", other)  # the one ahead stopped, then this one
        assert (attempt.outcome, attempt.ahead) == ("pass", False)
        assert [m.wanted for m in runner.made[1:]] == [False, True]
        assert (folder / script.name).read_text() == other
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


def test_a_forked_run_records_what_a_new_interpreter_records(tmp_path):
    """Issue 38: a later run forked from an interpreter that has imported torch (`Forking`) is the same run: the same
    failure, the same compiled graphs in its trace and recording, its output in its own files; only the first run,
    and any run before the forks are trusted but the control, starts anew."""
    script = SCRIPTS / "backend_failure.py"
    forks = FreshForks(tmp_path / "fresh")
    runner = VariantRunner(ScriptCall(script, (), tmp_path / "out", timeout_s=300), jobs=1, reporter=SilentReporter())
    try:
        runner.forking.server = forks
        anew = runner.submit(Variant.original(3, record=True)).result()  # no control yet
        runner.forking.first = anew.signature
        runner.forking.control = runner.submit(Variant.repeat())
        control = runner.forking.control.result()
        recorded = runner.submit(Variant.original(4, record=True)).result()
        first = runner.submit(Variant.original(1)).result()  # the user's autotuning: never forked
    finally:
        runner.close()
        forks.close()
    assert [a.forked for a in (anew, control, recorded, first)] == [False, True, True, False]
    assert anew.signature == control.signature == recorded.signature is not None
    sessions = runner.sessions
    ids = {label: [c.compile_id for c in sessions[label].compiles] for label in ("original-3", "original-4")}
    assert ids["original-3"] == ids["original-4"] and ids["original-3"]
    assert (runner.run_dir("original-4") / "graphs").is_dir()
    assert sessions["original-2"].stderr_tail and (runner.run_dir("original-2") / "stderr.txt").read_text()


@pytest.mark.parametrize(("script", "stands"), [("backend_failure.py", True), ("fork_changes_it.py", False)])
def test_a_run_forked_while_the_control_runs_stands_only_once_the_control_ended_as_the_first(tmp_path, script, stands):
    """Issue 38: the hand-over does not wait for the control; a run it forks meanwhile is made again anew where the
    control then ends otherwise than the first run (here: a program whose error says how its interpreter started)."""
    path = SCRIPTS / script if (SCRIPTS / script).exists() else HERE / "scripts" / script
    forks = FreshForks(tmp_path / "fresh")
    runner = VariantRunner(ScriptCall(path, (), tmp_path / "out", timeout_s=300), jobs=2, reporter=SilentReporter())
    try:
        first = runner.submit(Variant.original(1)).result()
        runner.forking.server, runner.forking.first = forks, first.signature
        runner.forking.control = runner.submit(Variant.repeat())
        meanwhile = runner.submit(Variant.original(3)).result()
    finally:
        runner.close()
        forks.close()
    assert runner.forking.trusted() is stands
    assert meanwhile.forked is stands and meanwhile.signature == first.signature
    assert [m.label for m in runner.made].count("original-3") == (1 if stands else 2)  # both runs are counted


@pytest.mark.timeout(240)
def test_a_run_that_starts_before_the_control_it_would_wait_for_starts_anew(tmp_path):
    """One thread: a run queued before the control and started once the control is known waits for nothing (forked,
    it would wait for the control, queued behind it, for ever)."""
    forks = FreshForks(tmp_path / "fresh")
    runner = VariantRunner(ScriptCall(SCRIPTS / "backend_failure.py", (), tmp_path / "out", timeout_s=120), jobs=1,
                           reporter=SilentReporter())
    try:
        first = runner.submit(Variant.original(1)).result()
        runner.forking.server, runner.forking.first = forks, first.signature
        busy = runner.submit(Variant.original(3))  # holds the one thread while the two below are queued
        queued = runner.submit(Variant.original(4))
        runner.forking.control = runner.submit(Variant.repeat())
        assert queued.result().forked is False and busy.result() is not None
        assert runner.forking.control.result().forked
    finally:
        runner.close()
        forks.close()


def test_a_script_that_sets_environment_variables_starts_anew(tmp_path):
    helper = tmp_path / "setup_env.py"
    helper.write_text("import os\nos.environ['TORCHINDUCTOR_FREEZING'] = '1'\n")
    own = tmp_path / "uses_helper.py"
    own.write_text("import setup_env\nimport torch\n")
    plain = tmp_path / "plain.py"
    plain.write_text("import torch\nimport numpy\nprint(torch.ones(2))\n")
    direct = tmp_path / "direct.py"
    direct.write_text("import os\nos.putenv('X', '1')\nimport torch\n")
    assert sets_environment(own) and sets_environment(direct) and not sets_environment(plain)


@pytest.mark.slow  # a whole diagnosis (35 s); fork_changes_it.py's control stays in the default run (the test above)
def test_a_fork_that_changes_the_outcome_is_caught_by_the_control_and_forking_stops(diagnosed):
    """The first run's repeat is forked as the control: where it ends otherwise than the first (here the program
    says how its interpreter started), it is made again anew, which stands for it, and nothing later is forked; the
    failure is not called flaky."""
    run, d = diagnosed(HERE / "scripts" / "fork_changes_it.py", options=("--no-minify", "--no-bisect"))
    runs = {a["label"]: a for a in d["attempts"]}
    assert runs["original-2"]["forked"] and "(forked)" in runs["original-2"]["error"]
    assert not runs["original-2-anew"]["forked"] and "(started anew)" in runs["original-2-anew"]["error"]
    assert not any(a["forked"] for a in d["attempts"] if a["label"] != "original-2")
    assert d["category"] == "backend_failure" and not d["flaky"]
    assert any("made again in a new interpreter" in note for note in d["notes"])


def test_the_first_run_keeps_aotautograds_cache_only_where_no_gpu_is_visible(tmp_path):
    """Where a GPU is visible the runs are not forked, so a run recorded again with the cache off would stand on the
    verdict's path for a whole run (`diagnose.aot_cache.keeps_aot_cache`): the first run keeps it off there."""
    runner = VariantRunner(ScriptCall(SCRIPTS / "hang.py", (), tmp_path, timeout_s=120), jobs=2,
                           reporter=SilentReporter())
    try:
        runner.gpu = GpuShare(gpu_visible=False, jobs=2)
        assert keeps_aot_cache(runner)
        runner.gpu = GpuShare(gpu_visible=True, jobs=2)
        assert not keeps_aot_cache(runner)
    finally:
        runner.close()
    assert Variant.original(1, record=True).keeps_aot_cache
    assert not Variant.original(1, record=True, aot_cache=False).keeps_aot_cache
    assert not Variant.original(2, record=True).keeps_aot_cache


@pytest.mark.parametrize("users", [None, "ACTIVE"])
def test_a_diagnosiss_runs_have_openmp_wait_passively_where_the_user_set_no_policy(tmp_path, monkeypatch, users):
    """Issue 38: where no GPU is visible the runs share the cores, and a spinning OpenMP thread burns the core another
    run needs (`launch.PASSIVE_WAIT`). The first run (anew), a later one forked from the fresh-forks server (which read
    the policy as it imported torch: its forks keep it) and the server's own verification forks all wait passively; a
    policy the user set stands; outside the diagnosis the environment is as it was."""
    if users is None:
        monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    else:
        monkeypatch.setenv("OMP_WAIT_POLICY", users)
    seen = tmp_path / "seen.txt"
    script = tmp_path / "says.py"
    script.write_text("import os\nimport torch\n"
                      f"open({str(seen)!r}, 'a').write(os.environ.get('OMP_WAIT_POLICY', '-') + '\\n')\n"
                      "raise RuntimeError('fails')\n")
    runner = VariantRunner(ScriptCall(script, (), tmp_path / "out", timeout_s=120), jobs=1, reporter=SilentReporter())
    with launch.threads_wait_passively():
        forks = FreshForks(tmp_path / "fresh")
        try:
            first = runner.submit(Variant.original(1)).result(timeout=120)
            runner.forking.server, runner.forking.first = forks, first.signature
            runner.forking.control = runner.submit(Variant.repeat())
            assert runner.forking.control.result(timeout=120).forked
            verified = forks.run(script, timeout_s=120)
            assert verified is not None and verified.returncode == 1
        finally:
            runner.close()
            forks.close()
    assert os.environ.get("OMP_WAIT_POLICY") == users
    assert seen.read_text().splitlines() == [users or "PASSIVE"] * 3
    with launch.threads_wait_passively(False):  # where a GPU is visible (`diagnose.procedure`)
        assert os.environ.get("OMP_WAIT_POLICY") == users


@pytest.mark.parametrize("fails", [True, False])
def test_the_repeat_forked_while_the_first_run_goes_stands_only_where_the_first_failed(tmp_path, fails):
    """Issue 38: the first run's repeat is forked as the control once the fork server is ready, while the first run
    still goes (it takes the core the first leaves idle). Where the first failed it stands (the same failure, forked);
    where the first passed it is stopped, ended, and the plain second run is made anew in its folder."""
    from pt2doctor.diagnose.repeat import SecondRun

    go = tmp_path / "go"
    script = tmp_path / "waits.py"
    script.write_text("import os, time\nimport torch\n"
                      f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.05)\n"
                      + ("raise RuntimeError('fails')\n" if fails else "print('passes')\n"))
    forks = FreshForks(tmp_path / "fresh")
    runner = VariantRunner(ScriptCall(script, (), tmp_path / "out", timeout_s=120), jobs=2, reporter=SilentReporter())
    try:
        first = runner.submit(Variant.original(1))
        repeat = SecondRun(runner)
        repeat.start_early(forks, first)
        deadline = time.monotonic() + 120
        while runner.forking.control is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert runner.forking.control is not None and not first.done()  # started while the first still goes
        go.write_text("")
        a1 = first.result(timeout=120)
        repeat.first_ended(a1, forks if fails else None)
        if fails:
            a2 = repeat.result()
            assert a2.forked and a2.signature == a1.signature is not None
            assert runner.forking.trusted() is True
        else:
            assert runner.forking.control is None and runner.forking.server is None
            again = runner.submit(Variant.original(2)).result(timeout=120)
            assert not again.forked and again.outcome == "pass"
            assert (runner.run_dir("original-2") / "stdout.txt").read_text().strip() == "passes"
    finally:
        runner.close()
        forks.close()
    assert [m.label for m in runner.made].count("original-2") == (1 if fails else 2)  # the stopped one counted

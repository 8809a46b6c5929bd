"""Programs of several processes: `run --nproc-per-node` (torchrun, gloo, CPU) and `report` on the traces of
several processes, one session per process, never merged by compile id, with what each rank does
differently and, for a job stopped at its timeout, where each rank was."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from clihelp import SCRIPTS, pt2doctor


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict, Path]:
    out = tmp_path_factory.mktemp("job")
    # torchrun's own command line, its flags passed through (the hang test below uses --nproc-per-node)
    run = pt2doctor("run", "--json", "--timeout", "240", "--out", str(out), "--", "torchrun", "--standalone",
                    "--nproc-per-node", "2", str(SCRIPTS / "ddp_ranks.py"), timeout=300)
    return run.code, json.loads(run.stdout), out


def test_torchruns_flags_the_script_and_its_arguments_are_told_apart():
    from pt2doctor.cli.run import split_torchrun

    flags, script, args = split_torchrun(("--nnodes", "1", "--rdzv-endpoint", "h:29500", "train.py", "--lr", "x.py"))
    assert (flags, script, args) == (("--nnodes", "1", "--rdzv-endpoint", "h:29500"), Path("train.py"),
                                     ("--lr", "x.py"))
    usage = pt2doctor("run", "--", "torchrun", "--nproc-per-node", "2", "-m", "trainer")
    assert usage.code == 64 and "a module (-m) is not supported" in usage.stderr


def _changes(doc: dict, kind: str) -> list[dict]:
    (divergence,) = doc["divergence"]
    return [c for c in divergence["comparison"]["changes"] if c["kind"] == kind]


def test_each_rank_is_its_own_session_and_the_job_exit_is_torchruns(job):
    code, doc, out = job
    assert doc["schema"] == "pt2doctor.job/1" and [p["label"] for p in doc["processes"]] == ["rank 0", "rank 1"]
    assert code != 0  # rank 1 raised, so torchrun failed
    rank0, rank1 = (p["session"] for p in doc["processes"])
    assert not rank0["failures"] and len(rank1["failures"]) == 1
    assert "IndexError" in rank1["failures"][0]["exception"] or "index" in rank1["failures"][0]["message"]
    assert (out / "rank-1" / "child.json").is_file() and (out / "session.json").is_file()
    assert doc["first_failure"] == "rank 1"


def test_the_divergence_names_the_break_only_rank_0_takes_and_the_recompile_only_rank_1_makes(job):
    _, doc, _ = job
    (divergence,) = doc["divergence"]
    assert divergence["label"] == "rank 1"
    breaks = _changes(doc, "graph_break")
    assert [(b["direction"], "print" in b["detail"]) for b in breaks] == [("removed", True)]  # only in rank 0
    (recompile,) = [c for c in _changes(doc, "recompile") if c["subject"].startswith("step")]
    assert recompile["direction"] == "added" and "size at dim 0 changed 8 -> 6" in recompile["detail"]
    assert [c["direction"] for c in _changes(doc, "failure")] == ["added"]
    (scaled,) = [c for c in _changes(doc, "recompile") if c["subject"].startswith("reduce_all")]
    assert scaled["direction"] == "added" and "`scale`" in scaled["detail"]
    assert "the graphs that differ issue all_reduce" in divergence["more"][0]  # after sync's other collectives


def test_report_reads_the_job_back_and_the_copied_traces_alike(job, tmp_path):
    _, doc, out = job
    again = pt2doctor("report", "--json", str(out))
    assert again.code == 0 and json.loads(again.stdout)["divergence"] == doc["divergence"]
    copied = tmp_path / "from-the-cluster"
    shutil.copytree(out / "trace", copied)
    traces = json.loads(pt2doctor("report", "--json", str(copied)).stdout)
    assert [p["label"] for p in traces["processes"]] == ["rank 0", "rank 1"]
    assert _changes(traces, "graph_break") == _changes(doc, "graph_break")
    text = pt2doctor("report", str(out)).stdout
    assert "rank 1 differs from rank 0:" in text and "only in rank 0" in text


def test_spawned_processes_are_kept_apart_not_merged_by_compile_id(tmp_path):
    env = {**os.environ, "TORCH_TRACE": str(tmp_path / "trace")}
    subprocess.run([sys.executable, str(SCRIPTS / "spawned.py")], env=env, check=True, capture_output=True, timeout=240)
    doc = json.loads(pt2doctor("report", "--json", str(tmp_path / "trace")).stdout)
    processes = doc["processes"]
    assert len(processes) == 2 and all(p["label"].startswith("pid ") for p in processes)
    assert sorted(len(p["session"]["recompiles"]) for p in processes) == [0, 1]
    assert all(p["session"]["compiles"][0]["compile_id"] == "0/0" for p in processes)
    assert not doc["divergence"][0]["consequence"]  # workers of a pool need not compile alike


@pytest.mark.slow
def test_a_hang_shows_which_rank_waits_in_which_collective_and_which_is_elsewhere(tmp_path):
    hang = tmp_path / "hang.py"
    hang.write_text(
        "import time\nimport torch\nimport torch.distributed as dist\n"
        "dist.init_process_group('gloo')\n"
        "y = torch.compile(lambda x: x.sin() * 2, backend='eager')(torch.ones(4))\n"
        "if dist.get_rank() == 0:\n    dist.all_reduce(y)\nelse:\n    time.sleep(600)\n")
    run = pt2doctor("run", "--nproc-per-node", "2", "--timeout", "45", "--json", "--out", str(tmp_path / "o"),
                    str(hang), timeout=200)
    assert run.code == 124
    at = {r["label"]: r for r in json.loads(run.stdout)["at_timeout"]}
    assert at["rank 0"]["state"] == "collective" and at["rank 0"]["detail"] == "all_reduce"
    assert at["rank 0"]["where"]["line"] == 7
    assert at["rank 1"]["state"] == "user code" and at["rank 1"]["where"]["code"] == "time.sleep(600)"


def test_graphs_both_ranks_compiled_once_are_compared_by_their_inputs_and_their_collectives(job):
    _, doc, out = job
    (shard,) = [c for c in _changes(doc, "graph_inputs") if c["subject"].startswith("shard")]
    assert (shard["before"], shard["after"]) == ("L_x_: f32[4][1]cpu", "L_x_: f32[5][1]cpu")
    assert "rank-dependent shape" in shard["detail"]
    (sync,) = _changes(doc, "collectives")
    assert sync["subject"].startswith("sync") and (sync["before"], sync["after"]) == ("all_reduce", "none")
    (divergence,) = doc["divergence"]
    # one consequence, the most likely (sync's collectives differ); the others are kept for the HTML report
    assert "no longer pair up" in divergence["consequence"] and "rank-dependent branch" in divergence["fix"]
    assert any("the graphs that differ issue all_reduce" in m for m in divergence["more"])
    assert any("tensors of other sizes" in m for m in divergence["more"])
    text = pt2doctor("report", str(out)).stdout
    assert "Graph inputs (tensor metadata):" in text and "Collectives per graph:" in text


def test_a_graph_one_rank_loads_from_the_cache_and_another_compiles_is_a_straggler():
    from pt2doctor.analysis.ranks import job_of
    from pt2doctor.model import SCHEMA, CompileId, ExitInfo, Session
    from pt2doctor.model.job import ProcessSession
    from pt2doctor.model.session import Compile

    def rank(n: int, hits: int, misses: int) -> ProcessSession:
        compiled = Compile(CompileId(0, 0), "f", "train.py", 3, 4, 1.0, "ok", cache_hits=hits, cache_misses=misses)
        session = Session(schema=SCHEMA, torch_version="2.13", command=("train.py",), exit=ExitInfo(code=0),
                          compiles=(compiled,))
        return ProcessSession(f"rank {n}", n, None, session)

    job = job_of((rank(0, 1, 0), rank(1, 0, 1)))
    (divergence,) = job.divergence
    (cache,) = [c for c in divergence.comparison.changes if c.subject == "f (train.py:3) graph 0"]
    assert (cache.before, cache.after) == ("hit", "miss") and "their caches differ" in cache.detail
    assert "waits for it at the first collective" in divergence.consequence


@pytest.mark.slow
def test_diagnose_a_job_diagnoses_the_rank_that_failed_first_with_a_single_process_repro(tmp_path):
    out = tmp_path / "diag"
    run = pt2doctor("diagnose", "--json", "--no-bisect", "--timeout", "240", "--out", str(out), "--nproc-per-node",
                    "2", str(SCRIPTS / "ddp_rank_backend.py"), timeout=900)
    assert run.code == 1, run.stderr[-3000:]
    d = json.loads(run.stdout)
    assert (d["rank"], d["ranks"], d["torchrun"]) == ("rank 1", 2, ["--nproc-per-node=2", "--standalone"])
    assert d["stage"] == "backend" and d["original_backend"] == "relu_compile_error_TESTING_ONLY"
    assert d["stages"] == {"eager": "pass", "aot_eager": "pass", "aot_eager_decomp_partition": "pass",
                           "relu_compile_error_TESTING_ONLY": "fail"}
    assert d["repro_verified"] and "relu" in d["culprit_ops"][0]
    assert all(a["rank"] == "rank 1" for a in d["attempts"] if a["outcome"] == "fail")
    assert "on rank 1 (the first of 2 ranks to fail)" in d["headline"]
    assert any("issues no collective" in note for note in d["notes"])
    issue = (out / "issue.md").read_text()
    assert "a job of 2 ranks" in issue and "rank 1 failed first" in issue
    repro = subprocess.run([sys.executable, d["repro"]], capture_output=True, text=True, timeout=240)
    assert repro.returncode != 0 and "ReluCompileError" in repro.stderr and "dist" not in Path(d["repro"]).read_text()


@pytest.mark.slow
def test_diagnose_a_job_whose_failing_graph_issues_a_collective_says_a_repro_needs_ranks(tmp_path):
    run = pt2doctor("diagnose", "--json", "--no-bisect", "--timeout", "240", "--out", str(tmp_path / "diag"), "--",
                    "torchrun", "--standalone", "--nproc-per-node", "2", str(SCRIPTS / "ddp_rank_collective_graph.py"),
                    timeout=900)
    assert run.code == 1, run.stderr[-3000:]
    d = json.loads(run.stdout)
    assert d["rank"] == "rank 1" and d["stage"] == "backend" and d["repro"] is None
    assert any("issues all_reduce, so a repro needs a process group of 2 ranks" in note for note in d["notes"])
    assert any("program not reduced" in note for note in d["notes"])


def test_a_graph_inductor_estimates_much_slower_on_one_rank_is_a_straggler_and_small_differences_are_not():
    from pt2doctor.analysis.ranks import job_of
    from pt2doctor.model import SCHEMA, CompileId, ExitInfo, Session
    from pt2doctor.model.job import ProcessSession
    from pt2doctor.model.session import Compile

    def job(*estimates: float | None, unknown: bool = False):
        def rank(n: int, ns: float | None) -> ProcessSession:
            outputs = ("all_reduce_: -",) * (n + 1) if unknown else (f"all_gather_into_tensor: f32[{8 * (n + 1)}]",)
            compiled = Compile(CompileId(0, 0), "f", "train.py", 3, 4, 1.0, "ok", estimated_runtime_ns=ns,
                               collective_outputs=outputs)
            session = Session(schema=SCHEMA, torch_version="2.13", command=("train.py",), exit=ExitInfo(code=0),
                              compiles=(compiled,))
            return ProcessSession(f"rank {n}", n, None, session)

        divergence = job_of(tuple(rank(n, ns) for n, ns in enumerate(estimates))).divergence
        return divergence[0] if divergence else None  # None: the ranks compiled alike

    slow = job(2e6, 6e6)
    assert slow is not None
    (runtime,) = [c for c in slow.comparison.changes if c.kind.value == "runtime_estimate"]
    assert (runtime.before, runtime.after) == ("2 ms", "6 ms") and "uneven shard" in runtime.detail
    assert "pairs tensors of other sizes" in slow.consequence  # a hang is likelier than a straggler
    assert any("arrives late at every collective" in m for m in slow.more)
    (outputs,) = [c for c in slow.comparison.changes if c.kind.value == "collective_outputs"]
    assert (outputs.before, outputs.after) == ("all_gather_into_tensor: f32[8]", "all_gather_into_tensor: f32[16]")
    # noise, CPU's zeros, one rank not logged, picoseconds (issue 40, point 4: 7.85e-06 us against 1.57e-05 us)
    for close in (job(2e6, 2.4e6), job(0.0, 0.0), job(None, 5e6), job(7.85e-3, 1.57e-2)):
        assert close is not None and [c for c in close.comparison.changes if c.kind.value == "runtime_estimate"] == []
    # outputs torch logged nothing of (in-place collectives): `all_reduce_: - -> all_reduce_: -` says nothing
    assert job(2e6, 2e6, unknown=True) is None


def test_output_code_that_calls_other_collectives_than_the_scheduler_placed_is_a_parity_gap():
    from pt2doctor.analysis.ranks import job_of
    from pt2doctor.model import SCHEMA, CompileId, ExitInfo, Session
    from pt2doctor.model.job import ProcessSession
    from pt2doctor.model.session import Compile
    from pt2doctor.report.ranks import render_job

    scheduled = ("all_reduce_", "wait_tensor", "all_gather_into_tensor", "wait_tensor")

    def rank(n: int, in_code: tuple[str, ...]) -> ProcessSession:
        compiled = Compile(CompileId(0, 0), "f", "train.py", 3, 4, 1.0, "ok", collective_schedule=scheduled,
                           code_collectives=in_code)
        session = Session(schema=SCHEMA, torch_version="2.13", command=("train.py",), exit=ExitInfo(code=0),
                          compiles=(compiled,))
        return ProcessSession(f"rank {n}", n, None, session)

    job = job_of((rank(0, scheduled), rank(1, scheduled[:2])))
    (gap,) = job.parity
    assert (gap.label, gap.graph, gap.in_code) == ("rank 1", "f (train.py:3) graph 0", ("all_reduce_", "wait_tensor"))
    assert "Inductor's code generation" in gap.detail
    assert "the output code calls all_reduce_, wait_tensor" in render_job(job)


@pytest.mark.slow
def test_a_collective_schedule_only_one_rank_reorders_and_graphs_run_in_another_order(tmp_path, monkeypatch):
    # a fresh Inductor cache: torch logs a graph's collective schedule only when it compiles it
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    run = pt2doctor("run", "--json", "--timeout", "300", "--nproc-per-node", "2", "--out", str(tmp_path / "o"),
                    str(SCRIPTS / "ddp_rank_schedule.py"), timeout=400)
    assert run.code == 0, run.stderr[-3000:]
    doc = json.loads(run.stdout)
    (schedule,) = _changes(doc, "collective_schedule")
    assert schedule["subject"].startswith("step") and _changes(doc, "collectives") == []  # Dynamo's graphs agree
    assert (schedule["before"], schedule["after"]) == ("all_reduce_, wait_tensor, all_reduce_, wait_tensor",
                                                       "all_reduce_, all_reduce_, wait_tensor, wait_tensor")
    (order,) = _changes(doc, "execution_order")
    assert order["before"].startswith("first") and order["after"].startswith("second")
    (divergence,) = doc["divergence"]
    assert "only their waits moved" in " ".join([divergence["consequence"], *divergence["more"]])
    text = pt2doctor("report", str(tmp_path / "o")).stdout
    assert "Collective schedule (Inductor):" in text and "Graph execution order:" in text
    # Inductor's runtime estimates were logged for the ranks (LOG_TLPARSE): the collectives' outputs are read
    assert any(c.get("collective_outputs") for p in doc["processes"] for c in p["session"]["compiles"])
    # each rank's output code calls the collectives its scheduler placed (tlparse's parity check): no gap
    steps = [c for p in doc["processes"] for c in p["session"]["compiles"] if c.get("collective_schedule")]
    assert len(steps) == 2 and all(c["code_collectives"] == c["collective_schedule"] for c in steps)
    assert doc["parity"] == []


def test_a_run_that_never_said_its_torch_version_is_no_change_of_torch():
    """Issue 40, point 4: `compare` of a job stopped at its timeout showed `torch: 2.11.0+cu130 -> ?`."""
    from pt2doctor.analysis.compare import compare
    from pt2doctor.model import SCHEMA, ExitInfo, Session

    def session(version: str) -> Session:
        return Session(schema=SCHEMA, torch_version=version, command=("train.py",), exit=ExitInfo(code=0))

    assert [c.kind.value for c in compare(session("2.11.0+cu130"), session("")).changes] == []
    assert [c.kind.value for c in compare(session("2.11.0+cu130"), session("2.13.0")).changes] == ["torch"]

"""The jobs users report, on two gloo ranks on CPU (`tests/scripts/rank_jobs/`, the same scripts as the NCCL tests
in test_rank_jobs_gpu.py): a rank that gets a shorter batch once, a compiled rank-dependent branch that issues one
all_reduce more on rank 1 (a hang), an eager loop where rank 0 calls all_reduce once more before a barrier (a
hang), and an all_reduce whose sizes differ across ranks. Each hang is reported with the first collective where
the ranks part (op, sizes and line per rank), on the job's own collective timeout and on pt2doctor's --timeout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clihelp import SCRIPTS, pt2doctor

JOBS = SCRIPTS / "rank_jobs"


def run_job(tmp_path: Path, script: str, *args: str, timeout: int = 120,
            extra: tuple[str, ...] = ()) -> tuple[int, dict]:
    run = pt2doctor("run", "--json", "--timeout", str(timeout), "--nproc-per-node", "2", *extra,
                    "--out", str(tmp_path / "job"), str(JOBS / script), *args, timeout=timeout + 120)
    return run.code, json.loads(run.stdout)


def line_of(script: str, text: str) -> int:
    return next(i for i, line in enumerate((JOBS / script).read_text().splitlines(), 1) if text in line)


def calls_at_parting(doc: dict) -> dict[str, dict | None]:
    return {r["label"]: r["call"] for r in doc["parting"]["calls"]}


@pytest.mark.slow
def test_a_rank_with_a_shorter_batch_once_recompiles_and_nothing_else_differs(tmp_path):
    code, doc = run_job(tmp_path, "short_batch.py")
    assert code == 0
    (divergence,) = doc["divergence"]
    kinds = {c["kind"] for c in divergence["comparison"]["changes"]}
    assert "graph_inputs" not in kinds
    recompiles = [c for c in divergence["comparison"]["changes"] if c["kind"] == "recompile"]
    assert any("size at dim 0 changed 8 -> 7" in c["detail"] for c in recompiles)
    assert doc["parting"] is None  # DDP's gradient all_reduces pair up
    if all(p["session"]["compiles"] and not any(c["ops"] for c in p["session"]["compiles"]) for p in doc["processes"]):
        # torch.compile(DDP(model)) on torch 2.13 (and 2.11, issue #28): 4 frames, 0 graphs on every rank
        assert {n["label"] for n in doc["compiled_little"]} == {"rank 0", "rank 1"}
        assert all("DistributedDataParallel's forward graph-breaks" in n["detail"] for n in doc["compiled_little"])
        assert "neither ran a compiled graph" in divergence["consequence"]  # no compiled collective to mis-pair
    assert all(len(p["collectives"]["calls"]) > 0 for p in doc["processes"])


@pytest.mark.slow
def test_a_compiled_branch_that_issues_one_all_reduce_more_is_named_at_pt2doctors_timeout(tmp_path):
    # rank 0 stays alive when done (gloo would fail rank 1's pending all_reduce as soon as rank 0 exits)
    code, doc = run_job(tmp_path, "compiled_branch.py", "--linger", "600", timeout=60)
    assert code == 124
    parting = doc["parting"]
    assert parting["seq"] == 3
    calls = calls_at_parting(doc)
    assert calls["rank 0"] is None
    extra = calls["rank 1"]
    assert extra["op"] == "all_reduce" and extra["input_sizes"] == [[1024]] and extra["compiled"]
    assert extra["where"]["line"] == line_of("compiled_branch.py", "x = step(x)")
    rank0 = next(r for r in parting["calls"] if r["label"] == "rank 0")
    assert rank0["issued"] == 2 and "issued no collective at this number" in parting["detail"]
    at = {r["label"]: r for r in doc["at_timeout"]}
    assert at["rank 1"]["pending"]["seq"] == 3
    assert at["rank 1"]["state"] == "collective"
    html = pt2doctor("report", "--html", str(tmp_path / "job"))
    assert html.code == 0 and "The ranks part at collective #3" in (tmp_path / "job" / "report.html").read_text()


@pytest.mark.slow
def test_the_same_hang_is_named_on_the_jobs_own_collective_timeout(tmp_path):
    code, doc = run_job(tmp_path, "compiled_branch.py", "--pg-timeout", "10", "--linger", "60")
    assert code not in (0, 124)  # the backend's timeout ended it, not pt2doctor's
    assert doc["parting"]["seq"] == 3 and calls_at_parting(doc)["rank 0"] is None
    when = {p["label"]: p["collectives"]["when"] for p in doc["processes"]}
    # rank 1 raised gloo's timeout; torchrun then stopped rank 0, which wrote its record as it was stopped
    assert when == {"rank 0": "when the job stopped it", "rank 1": "after the script raised"}


@pytest.mark.slow
def test_an_eager_all_reduce_more_on_rank_0_pairs_with_rank_1s_barrier(tmp_path):
    code, doc = run_job(tmp_path, "eager_extra.py", "--pg-timeout", "10", extra=("--html",))
    assert code != 0
    assert doc["parting"]["seq"] == 3
    calls = calls_at_parting(doc)
    assert calls["rank 0"]["op"] == "all_reduce" and calls["rank 1"]["op"] == "barrier"
    assert calls["rank 0"]["where"]["line"] == line_of("eager_extra.py", "dist.all_reduce(x)")
    assert calls["rank 1"]["where"]["line"] == line_of("eager_extra.py", "dist.barrier()")
    assert not calls["rank 0"]["compiled"]
    assert doc["divergence"] == [] or all(c["kind"] != "graph_inputs" for d in doc["divergence"]
                                          for c in d["comparison"]["changes"])
    assert (tmp_path / "job" / "report.html").is_file()


@pytest.mark.slow
def test_an_all_reduce_whose_sizes_differ_across_ranks_names_the_rank_gloo_aborted_and_nothing_false(tmp_path):
    # gloo aborts the rank that receives more bytes than it expects (its enforce, in a gloo thread): that rank
    # writes no record, so the parting is not named; the abort and the other rank's pending call are
    code, doc = run_job(tmp_path, "sizes_differ.py", "--pg-timeout", "10")
    assert code != 0
    died = [p for p in doc["processes"] if p["session"]["exit"]["signal"] == 6]
    assert len(died) == 1 and (died[0]["session"]["failures"][0]["line"]
                               == line_of("sizes_differ.py", "dist.all_reduce(x)"))
    (waiting,) = [p for p in doc["processes"] if p is not died[0]]
    (call,) = waiting["collectives"]["calls"]
    assert call["op"] == "all_reduce" and call["input_sizes"] in ([[4]], [[5]])
    assert doc["parting"] is None and doc["unrecorded"] == [died[0]["label"]]


def test_a_job_of_two_agents_each_under_pt2doctor_comes_together_in_report(tmp_path):
    """Issue 40, point 3: `--nnodes 2` on one host (c10d rendezvous on localhost, gloo), one pt2doctor per agent as
    under a cluster's launcher (one per node); each writes its own rank's directory, and `report` takes both."""
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    torchrun = ("torchrun", "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                "--rdzv-endpoint", f"localhost:{port}", "--rdzv-id", "pt2doctor-two-agents")
    agents = [subprocess.Popen([sys.executable, "-m", "pt2doctor", "run", "--json", "--timeout", "240", "--out",
                                str(tmp_path / f"node{n}"), "--", *torchrun, str(JOBS / "short_batch.py")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for n in range(2)]
    ended = [agent.communicate(timeout=400) for agent in agents]
    assert [agent.returncode for agent in agents] == [0, 0], [err[-2000:] for _, err in ended]
    ranks = sorted(p["label"] for out, _ in ended for p in json.loads(out)["processes"])
    assert ranks == ["rank 0", "rank 1"]  # one rank each: the agents' global ranks
    both = pt2doctor("report", "--json", str(tmp_path / "node0"), str(tmp_path / "node1"))
    doc = json.loads(both.stdout)
    assert both.code == 0 and [p["label"] for p in doc["processes"]] == ["rank 0", "rank 1"]
    (divergence,) = doc["divergence"]  # rank 1's shorter batch recompiles only there, as with --nproc-per-node 2
    assert any(c["kind"] == "recompile" for c in divergence["comparison"]["changes"])
    lone = pt2doctor("report", str(tmp_path / "node0"), str(tmp_path / "node1" / "missing"))
    assert lone.code == 64 and "Traceback" not in lone.stderr

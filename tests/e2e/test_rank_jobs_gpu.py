"""The jobs of test_rank_jobs.py on NCCL, one GPU per rank (2 GPUs; skipped with fewer): the same scripts with
`--backend nccl`, the compiled one through Inductor. Besides the first collective where the ranks part, each
checks that no false divergence comes from each rank running on its own device (cuda:0 vs cuda:1)."""

from __future__ import annotations

import pytest
from test_rank_jobs import calls_at_parting, line_of, run_job

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def two_gpus() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 CUDA devices (one per rank)")


def _no_device_divergence(doc: dict) -> None:
    for d in doc["divergence"]:
        for c in d["comparison"]["changes"]:
            assert not (c["kind"] == "graph_inputs" and "cuda:0" in c["before"] and "cuda:1" in c["after"]), c


def test_nccl_a_rank_with_a_shorter_batch_once_recompiles_and_no_device_divergence(tmp_path):
    code, doc = run_job(tmp_path, "short_batch.py", "--backend", "nccl", "--compiler", "inductor", timeout=300)
    assert code == 0
    _no_device_divergence(doc)
    (divergence,) = doc["divergence"]
    assert any("size at dim 0 changed 8 -> 7" in c["detail"] for c in divergence["comparison"]["changes"]
               if c["kind"] == "recompile") or doc["compiled_little"]  # DDP's forward may compile nothing: said so
    assert doc["parting"] is None


def test_nccl_a_compiled_branch_with_one_all_reduce_more_is_named_at_pt2doctors_timeout(tmp_path):
    code, doc = run_job(tmp_path, "compiled_branch.py", "--backend", "nccl", "--compiler", "inductor", timeout=180)
    assert code == 124
    _no_device_divergence(doc)
    assert doc["parting"]["seq"] == 3
    calls = calls_at_parting(doc)
    assert calls["rank 0"] is None and calls["rank 1"]["op"] == "all_reduce"
    assert calls["rank 1"]["input_sizes"] == [[1024]]
    at = {r["label"]: r for r in doc["at_timeout"]}
    assert at["rank 1"]["pending"]["seq"] == 3  # waiting in torch.cuda.synchronize() for it
    assert at["rank 1"]["where"]["line"] != 0 and at["rank 1"]["state"] != "compiling"


def test_nccl_a_compiled_branch_hang_is_named_on_the_jobs_own_collective_timeout(tmp_path):
    code, doc = run_job(tmp_path, "compiled_branch.py", "--backend", "nccl", "--compiler", "inductor",
                        "--pg-timeout", "30", timeout=300)
    assert code not in (0, 124)  # NCCL's watchdog ended it; its dump on timeout is what the ranks left
    assert doc["parting"]["seq"] == 3 and calls_at_parting(doc)["rank 0"] is None


def test_nccl_an_eager_all_reduce_more_on_rank_0_pairs_with_rank_1s_barrier(tmp_path):
    code, doc = run_job(tmp_path, "eager_extra.py", "--backend", "nccl", timeout=120, extra=("--html",))
    assert code == 124
    _no_device_divergence(doc)
    assert doc["parting"]["seq"] == 3
    calls = calls_at_parting(doc)
    assert calls["rank 0"]["op"] == "all_reduce"
    # NCCL's barrier is a 1-element all_reduce: named so, or told apart by its size
    assert "barrier" in calls["rank 1"]["op"] or calls["rank 1"]["input_sizes"] != calls["rank 0"]["input_sizes"]
    assert calls["rank 0"]["where"]["line"] == line_of("eager_extra.py", "dist.all_reduce(x)")
    assert (tmp_path / "job" / "report.html").is_file()


def test_nccl_an_all_reduce_whose_sizes_differ_across_ranks_is_named(tmp_path):
    code, doc = run_job(tmp_path, "sizes_differ.py", "--backend", "nccl", timeout=120)
    assert code != 0
    assert doc["parting"]["seq"] == 1
    calls = calls_at_parting(doc)
    assert (calls["rank 0"]["input_sizes"], calls["rank 1"]["input_sizes"]) == ([[4]], [[5]])

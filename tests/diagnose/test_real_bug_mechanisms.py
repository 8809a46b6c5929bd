"""`pt2doctor diagnose` on real bugs from tests/realbugs (reported to pytorch/pytorch, still failing on
torch 2.13), one mechanism each: what used to be misdiagnosed on that program."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from clihelp import pt2doctor

REALBUGS = Path(__file__).parents[1] / "realbugs"


@pytest.mark.slow
def test_a_side_effect_dynamo_drops_is_a_dynamo_wrong_result_not_a_user_error(diagnosed):
    # pytorch#197896: a closure list appended to from a local class's method stays empty when compiled
    run, d = diagnosed(REALBUGS / "closure_list_mutation_in_local_class.py")
    assert (d["category"], d["stage"], run.code) == ("accuracy", "dynamo", 1)
    assert d["stages"]["eager"] == "fail" and any(a["label"] == "force_eager" and a["outcome"] == "pass"
                                                  for a in d["attempts"])
    issue = (run.out_dir / "issue.md").read_text()
    # the program (reduced: tests/diagnose/test_program_repro.py), not only the assert line
    assert ".append(" in issue and "torch.compile(fn" in issue


@pytest.mark.slow
def test_a_recording_that_changes_the_outcome_is_not_flakiness(diagnosed):
    # pytorch#198056: with the graph recorder on, this NumPy program failed inside Dynamo instead of at its check
    pytest.importorskip("numpy")  # the program's own import: without NumPy it fails uncompiled (a user error)
    run, d = diagnosed(REALBUGS / "numpy_cumsum_int8_dtype.py")
    assert not d["flaky"] and run.code != 3
    if any("recording the graphs changed the outcome" in note for note in d["notes"]):
        assert [a["label"] for a in d["attempts"]][:4] == ["original-1", "original-2", "original-3", "original-4"]
    assert (d["category"], d["stage"]) == ("accuracy", "dynamo")


@pytest.mark.slow
def test_a_wrong_result_is_minified_on_the_values_the_program_passed(diagnosed):
    # pytorch#197895: `a // b` is off by one only where the quotient is just below an integer (1.0 // 0.1):
    # on random inputs the graph passed ("not minified"); the per-graph check on the real values finds it
    run, d = diagnosed(REALBUGS / "float_floor_divide_off_by_one.py")
    assert (d["category"], d["stage"]) == ("accuracy", "inductor")
    assert d["repro_verified"] and d["minified_nodes"] == 1 and "aten.div.Tensor_mode" in d["culprit_ops"]
    # judged in the recorded run itself (no accuracy-check run of its own): its graph's first call, on its values
    judged = [f.read_text() for f in (run.out_dir / "runs").glob("*/graphs/failures.jsonl")]
    assert any("accuracy" in text for text in judged), judged
    # the values, not random ones: in the harness form, and in repro.py in PyTorch's idiom beside it
    assert "saved_input(" in (run.out_dir / "repro_graph.py").read_text()
    assert 'torch.load(Path(__file__).with_name("repro_inputs.pt")' in (run.out_dir / "repro.py").read_text()


@pytest.mark.slow
def test_a_non_leaf_input_stays_a_non_leaf_in_the_repro(diagnosed):
    # PyTorch's minifier test: the backend fails only for a non-leaf input (`randn(requires_grad=True) + 1`)
    run, d = diagnosed(REALBUGS / "minifier_dynamo_non_leaf_compile_error.py")
    assert (d["category"], d["stage"]) == ("backend_failure", "backend")
    assert d["repro_verified"], d["notes"]
    # the short form's input is a leaf's clone, as the harness form's (kept as repro_graph.py) is
    assert ".requires_grad_().clone()" in (run.out_dir / "repro.py").read_text()
    assert "requires_grad=True).clone()" in (run.out_dir / "repro_graph.py").read_text()


@pytest.mark.slow
def test_a_zero_tensor_input_is_rebuilt_as_one(diagnosed):
    # pytorch#197067: Inductor's kernel segfaults on a ZeroTensor (the gradient of `sgn`); as a plain tensor it passes.
    # The graph is compiled for a plain tensor, as AOTAutograd has it: the kernel that reads it stays in the graph
    run, d = diagnosed(REALBUGS / "zerotensor_index_segfault.py")
    assert d["repro_verified"] and d["culprit_ops"] == ["aten.select.int", "aten.add.Tensor"], d["notes"]
    assert d["minify"]["signature"]["text"] == "SIGSEGV"
    # repro.py in PyTorch's idiom, its input made as a ZeroTensor; the harness form too
    assert "args = [torch._efficientzerotensor((1,), dtype=torch.float32)]" in (run.out_dir / "repro.py").read_text()
    assert "torch._efficientzerotensor(" in (run.out_dir / "repro_graph.py").read_text()
    assert d["short"]["test"] is not None  # it segfaults in a test too


@pytest.mark.slow
def test_a_jvp_segfault_in_aot_autograd_gets_a_graph_repro_and_the_program_as_its_short_form(diagnosed):
    # pytorch#197086: the Dynamo graph calls functorch's scaffolding, which tracing rejected ("_unwrap_for_grad():
    # incompatible function arguments ... Proxy") until the graph repro recorded it; that graph has no short form
    # (functorch's private calls), so repro.py is the program reduced and the graph's harness form repro_graph.py
    run, d = diagnosed(REALBUGS / "jvp_ldexp_aot_eager_segfault.py")
    assert (d["category"], d["stage"]) == ("runtime_crash", "aot_autograd")
    assert d["repro_verified"] and d["minify"]["verified"], d["notes"]
    assert d["minify"]["signature"]["text"] == "SIGSEGV" and "torch.ldexp" in d["culprit_ops"]
    assert d["program"]["reason"] == "short" and d["repro"] == d["short"]["repro"] == d["program"]["repro_path"]
    assert "torch.func.jvp(" in Path(d["repro"]).read_text() and d["short"]["lines"] <= 20
    assert Path(d["minify"]["repro_path"]).name == "repro_graph.py"


@pytest.mark.slow
def test_a_graph_whose_short_forms_do_not_reproduce_hands_over_the_program_reduced(diagnosed):
    # pytorch#141557: the minimal graph is one `prims.inductor_seeds` node, whose short forms draw as eager does and
    # pass, so repro.py was the minifier's harness form (485 lines); the program reduced is the repro, the harness form
    # repro_graph.py, and the thread's setting is still the workaround
    run, d = diagnosed(REALBUGS / "dropout_manual_seed_rng_mismatch.py")
    assert d["minify"]["verified"] and d["repro_verified"], d["notes"]
    assert d["program"]["reason"] == "short" and d["repro"] == d["short"]["repro"] == d["program"]["repro_path"]
    assert d["short"]["lines"] <= 40 and "F.dropout(" in Path(d["repro"]).read_text()
    assert Path(d["minify"]["repro_path"]).name == "repro_graph.py"
    first = d["workarounds"][0]
    assert first["kind"] == "config" and "torch._inductor.config.fallback_random = True" in first["change"]


@pytest.mark.slow
def test_a_heap_overflow_found_after_the_kernel_returned_blames_the_graph_that_ran(diagnosed):
    # pytorch#196681: glibc aborts at a later free (sometimes after the script's check raised), with no graph in
    # flight: "no graph failed", or minified as a wrong result that in isolation aborted instead
    run, d = diagnosed(REALBUGS / "tiled_reduction_tail_heap_overflow.py")
    assert (d["category"], d["stage"]) == ("runtime_crash", "inductor")
    assert d["repro_verified"] and d["minify"]["signature"]["text"] == "SIGABRT", d["notes"]
    assert "aten.bmm.default" in d["culprit_ops"]


@pytest.mark.slow
def test_a_decomposed_minimal_graph_names_the_users_call_it_came_from(diagnosed):
    # pytorch#185517: the minimal after-AOT graph is add, ge (the backward's mask, on the value the graph computed
    # there): part of what F.margin_ranking_loss decomposed into
    run, d = diagnosed(REALBUGS / "margin_ranking_loss_bf16_backward.py")
    assert d["repro_verified"], d["notes"]
    calls = {o.get("call") for o in d["culprit_sources"]}
    assert "torch.nn.functional.margin_ranking_loss" in calls
    assert all(o.get("file", "").endswith("margin_ranking_loss_bf16_backward.py") for o in d["culprit_sources"])
    assert "margin_ranking_loss at margin_ranking_loss_bf16_backward.py:14" in (run.out_dir / "issue.md").read_text()
    assert "came from: torch.nn.functional.margin_ranking_loss" in (run.out_dir / "repro.py").read_text()
    # the mask's input is the value the graph computed there (bf16 rounding decides the mask): with a random
    # stand-in no cut reproduced and the repro kept the 5 nodes that compute it
    assert "saved_input('node:" in (run.out_dir / "repro_graph.py").read_text() and d["minified_nodes"] == 2
    assert "saved['node:" in (run.out_dir / "repro.py").read_text()  # the short form reads the same value


@pytest.mark.slow
@pytest.mark.parametrize(("script", "path"), [("bound_method_code_stale.py", "Model.m.__code__"),
                                              ("module_dict_shadowing_stale.py", "model.__dict__['sub']")])
def test_a_stale_result_names_the_change_no_guard_caught(diagnosed, script, path):
    # pytorch#197860, #197859: the compiled callable keeps returning what the state before the change gave
    run, d = diagnosed(REALBUGS / script)
    assert d["program"] and d["repro_verified"], d["notes"]
    assert d["culprit_ops"][0] == path and [c["path"] for c in d["program"]["changes"]] == [path]
    assert f"it writes {path}, which no guard checks" in (run.out_dir / "issue.md").read_text()
    assert f"writes {path}, which no guard checks" in (run.out_dir / "repro.py").read_text().split('"""')[1]


@pytest.mark.slow
def test_a_failure_that_needs_a_non_leaf_input_says_so(diagnosed):
    # the backend fails only on a non-leaf input: as a leaf (requires_grad, no history) the repro passes
    run, d = diagnosed(REALBUGS / "minifier_dynamo_non_leaf_compile_error.py")
    assert d["repro_verified"] and [(n["input"], n["property"]) for n in d["input_needs"]] == [(0, "non-leaf")]
    assert "must be a non-leaf tensor (with autograd history)" in (run.out_dir / "issue.md").read_text()


@pytest.mark.slow
@pytest.mark.gpu
def test_an_error_raised_by_dynamos_own_runtime_code_is_dynamo_internal(diagnosed):
    # pytorch#176486: Dynamo traces `torch.cuda.Event.record` into its own op, which raises as the graph runs,
    # with every backend: Dynamo's error, not a backend's
    run, d = diagnosed(REALBUGS / "cuda" / "cuda_event_record_in_compiled_fn.py")
    assert (d["category"], d["stage"], run.code) == ("dynamo_internal", "dynamo", 1)
    assert d["repro_verified"] and "event.record()" in Path(d["repro"]).read_text()
    assert any("side table" in note for note in d["notes"])  # why the graph alone is no repro, in words


@pytest.mark.slow
def test_a_wrong_gradient_of_a_graph_the_cache_serves_is_recorded_again_with_the_cache_off(tmp_path, monkeypatch):
    # pytorch#185517 on caches its plain run left warm, as a user who ran it before has them: the first run keeps
    # AOTAutograd's cache on and its graph comes from it, so no after-AOT graph is recorded or judged, and the wrong
    # backward shows in no recorded graph; one more recorded run with the cache off stands for it, and the verdict is
    # the one diagnose gives on cold caches (test_a_decomposed_minimal_graph_names_the_users_call_it_came_from)
    script = REALBUGS / "margin_ranking_loss_bf16_backward.py"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "caches"))
    subprocess.run([sys.executable, str(script)], capture_output=True, timeout=600, check=False)
    run = pt2doctor("diagnose", "--out", "bundle", str(script), cwd=tmp_path, timeout=900)
    d = json.loads((tmp_path / "bundle" / "diagnosis.json").read_text())
    labels = [a["label"] for a in d["attempts"]]
    assert labels[:3] == ["original-1", "original-2", "aot-cache-off"], (labels, run.stderr[-2000:])
    assert any("AOTAutograd's cache served 1 graph(s)" in note for note in d["notes"])
    assert (d["category"], d["stage"], d["repro_verified"]) == ("accuracy", "inductor", True)
    assert {"aten.add.Scalar", "aten.ge.Scalar"} <= set(d["culprit_ops"])

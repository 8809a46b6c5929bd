"""Accuracy analysis on hand-built results: one behaviour per test, no torch."""

from __future__ import annotations

from pt2doctor.analysis.accuracy import explain, headline, needs_rng_recheck
from pt2doctor.analysis.verdict import verdict_for
from pt2doctor.model import SCHEMA, Category, ExitInfo, Session
from pt2doctor.model.accuracy import DivergentNode, Errors, GraphAccuracy, NonBugCause
from pt2doctor.model.exit_codes import ExitCode
from pt2doctor.model.serialize import convert, to_builtins
from pt2doctor.report.accuracy import render_accuracy

RELU = DivergentNode("relu", "torch.relu", "/x/train.py", 12, "y = torch.relu(x)", (4,), "float32", 1.0, 1e6)


def _exit_code(script_code: int, results: list[GraphAccuracy]) -> int:
    return verdict_for(Session(SCHEMA, "2.13.0", ("t.py",), ExitInfo(script_code), accuracy=tuple(results))).exit_code


def _fail(**kw) -> GraphAccuracy:
    kw.setdefault("first_divergent", RELU)
    kw.setdefault("backend", "inductor")
    return GraphAccuracy("0/0", "fail", max_abs_err=1.0, rmse_ratio=1e6, **kw)


def test_rng_recheck_only_for_failing_graphs_with_random_ops():
    assert needs_rng_recheck([_fail(random_ops=("torch.nn.functional.dropout",))])
    assert not needs_rng_recheck([_fail()])
    assert not needs_rng_recheck([GraphAccuracy("0/0", "pass", random_ops=("torch.rand",))])


def test_random_failure_explained_when_fallback_random_passes():
    (result,) = explain([_fail(random_ops=("torch.rand",))], [GraphAccuracy("0/0", "pass")])
    assert result.explained and NonBugCause.RANDOM in result.causes and result.recheck.verdict == "pass"
    assert _exit_code(0, [result]) == 0


def test_random_failure_that_persists_is_real_and_takes_the_clean_localization():
    clean = DivergentNode("mul", "torch.mul", "/x/train.py", 20)
    (result,) = explain([_fail(random_ops=("torch.rand",))], [_fail(first_divergent=clean)])
    assert result.real_failure and result.first_divergent == clean
    assert _exit_code(0, [result]) == ExitCode.MISMATCH


def test_reduced_precision_is_called_out_but_never_excuses():
    (result,) = explain([_fail(reduced_precision=("bfloat16",))])
    assert NonBugCause.REDUCED_PRECISION in result.causes and result.real_failure


def test_nondeterminism_explains_when_run_to_run_noise_is_as_large():
    (noisy,) = explain([_fail(deterministic=False, run_to_run_max_abs=0.8)])
    (small,) = explain([_fail(deterministic=False, run_to_run_max_abs=1e-6)])
    assert noisy.explained and not small.explained


def test_script_failure_wins_the_exit_code():
    assert _exit_code(3, [_fail()]) == 3


def test_unexplained_failure_is_the_runs_verdict():
    verdict = verdict_for(Session(SCHEMA, "2.13.0", ("t.py",), ExitInfo(0), accuracy=(_fail(),)))
    assert not verdict.ok and verdict.category is Category.ACCURACY and verdict.exit_code == ExitCode.MISMATCH
    assert verdict.headline.startswith("FAILED (accuracy): 1 graph(s): 0 pass, 1 FAIL")


def test_headline_and_text_name_the_first_divergent_op():
    text = render_accuracy([_fail(), GraphAccuracy("1/0", "pass")])
    assert text.startswith("accuracy: 2 graph(s): 1 pass, 1 FAIL; first divergent op torch.relu at /x/train.py:12")
    assert "y = torch.relu(x)" in text
    assert headline([]).startswith("accuracy: no compiled graph")


def test_results_round_trip_through_json():
    (result,) = explain([_fail(random_ops=("torch.rand",))], [GraphAccuracy("0/0", "pass")])
    assert convert(to_builtins(result), GraphAccuracy) == result


def test_fallback_random_is_inductors_config_so_other_backends_are_not_rechecked():
    user = _fail(random_ops=("torch.rand",), backend="my_backend")
    assert not needs_rng_recheck([user])
    (result,) = explain([user], [GraphAccuracy("0/0", "pass")])
    assert result.recheck is None and result.real_failure and result.causes == (NonBugCause.RANDOM,)
    text = render_accuracy([result])
    assert "compiled may draw different numbers" in text and "fallback_random" not in text
    assert "fallback_random = True to make compiled draw like eager" in render_accuracy(
        explain([_fail(random_ops=("torch.rand",))]))


def test_random_ops_are_no_cause_of_a_graph_that_passes():
    (result,) = explain([GraphAccuracy("0/0", "pass", random_ops=("torch.rand",), backend="inductor")])
    assert result.causes == () and "random ops" not in render_accuracy([result])


def test_an_unavailable_fp64_reference_is_stated_with_its_reason():
    result = _fail(fp64_unavailable="RuntimeError: expected m1 and m2 to have the same dtype")
    text = render_accuracy([result])
    assert "fp64 reference unavailable: RuntimeError: expected m1 and m2 to have the same dtype" in text
    assert "judged against eager alone" in text
    assert convert(to_builtins(result), GraphAccuracy) == result


def test_a_reference_equal_to_eager_is_said_to_carry_no_information():
    same = GraphAccuracy("0/0", "pass", forward=Errors("pass", 0.0, 0.0, None, 0.0, 0.0))
    differs = GraphAccuracy("0/0", "pass", forward=Errors("pass", 0.0, 0.0, 1.0, 1e-8, 1e-8))
    assert same.reference_equals_eager and not differs.reference_equals_eager
    assert "carries no information about this" in render_accuracy([same])
    assert "carries no information" not in render_accuracy([differs])


def test_each_graph_minified_gets_a_directory_of_its_own_across_a_dynamo_reset():
    """Issue #30: `0/1@1` (after a reset) and `!0/1/1` (a compiled-autograd graph) must not share `minify-0-1-1`."""
    from pt2doctor.workflows.accuracy_minify import _safe_name

    names = [_safe_name(cid) for cid in ("0/1", "0/1@1", "!0/1/1")]
    assert names == ["0-1", "0-1@1", "0-1-1"]

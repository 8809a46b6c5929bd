"""The probe's pieces on tiny symbolically traced graphs: which ops draw, the fp64 copy, the rule."""

from __future__ import annotations

import torch
import torch.fx
import torch.nn.functional as F

from pt2doctor.capture.child.accuracy_probe import compare, fp64_run, missing_reference
from pt2doctor.capture.torch_compat import fp64_module, random_ops


def _ops(fn) -> tuple[str, ...]:
    return random_ops(torch.fx.symbolic_trace(fn))


def test_a_dropout_draws_only_in_training_with_p_above_zero():
    assert _ops(lambda x: F.dropout(x, 0.0) + F.dropout(x, p=0.5, training=False) + F.dropout(x, 0.5, False)) == ()
    assert _ops(lambda x: F.dropout(x, 0.1)) == ("torch.nn.functional.dropout",)
    assert _ops(lambda x: F.alpha_dropout(x, p=0.2, training=True)) == ("torch.nn.functional.alpha_dropout",)


def test_rrelu_draws_only_in_training_and_lookalike_names_never_draw():
    assert _ops(lambda x: F.rrelu(x) + F.normalize(x) + x.expand(2, 3)) == ()
    assert _ops(lambda x: F.rrelu(x, training=True)) == ("torch.nn.functional.rrelu",)
    assert _ops(lambda x: torch.rand_like(x) + x.bernoulli_(0.5)) == ("torch.rand_like", "Tensor.bernoulli_")


def _casts(x):
    return x.to(torch.float32) * x.float() + torch.zeros(3, dtype=torch.float32) + x.type(torch.bfloat16)


def test_the_fp64_copy_computes_every_named_float_dtype_in_fp64():
    gm = torch.fx.symbolic_trace(_casts)
    x = torch.randn(3)
    assert fp64_module(gm)(x.double()).dtype == torch.float64
    assert gm(x).dtype == torch.float32  # the original graph is untouched


def test_a_bitcast_stays_and_the_reason_is_kept_in_one_line():
    gm = torch.fx.symbolic_trace(lambda x, bits: x @ bits.view(torch.float32))
    run, why = fp64_run(gm, [torch.randn(2, 2), torch.randn(2, 2).view(torch.int32)], False)
    assert run is None and why.startswith("RuntimeError: expected m1 and m2 to have the same dtype")
    assert "\n" not in why


def test_an_output_without_fp64_value_is_judged_against_eager_alone():
    """`same(..., ignore_non_fp=True)` would pass it: its float32 'reference' is not float64."""
    eager = torch.linspace(0, 1, 2000)
    wrong = eager.to(torch.bfloat16).float()
    errors = compare([eager], [wrong], [eager.clone()], 1e-4)
    assert errors.verdict == "fail" and errors.rmse_ratio is None and errors.max_abs_err > 1e-3
    assert compare([eager], [eager.clone()], None, 1e-4).verdict == "pass"
    assert missing_reference([eager], [eager.clone()]) == "output 0 stays float32 in the fp64 run"
    assert missing_reference([eager], [eager.double()]) is None


def test_rmse_ratio_is_undefined_when_eager_equals_fp64():
    eager = torch.linspace(0, 1, 2000)
    errors = compare([eager], [eager + 1e-6], [eager.double()], 1e-4)
    assert errors.verdict == "pass" and errors.rmse_eager == 0.0 and errors.rmse_ratio is None


def test_a_graph_the_probe_cannot_run_is_an_error_and_leaves_no_functorch_level_behind(tmp_path):
    """A graph that raises between functorch's increment and decrement calls (a `torch.func`
    transform Dynamo inlined, run outside the program's call) is reported, not raised, and the
    transform stack is as the program left it."""
    from pt2doctor.capture.child.accuracy_probe import AccuracyProbe

    def uncheckable(x):
        torch._C._functorch._grad_increment_nesting()
        raise RuntimeError("a level the program set up")

    depth = torch._C._functorch.get_dynamic_layer_stack_depth()
    record = AccuracyProbe(tmp_path / "accuracy.jsonl", 1e-4).check("0/0", uncheckable, None, torch.sin,
                                                                      [torch.ones(2)])
    assert (record.verdict, record.error) == ("error", "RuntimeError: a level the program set up")
    assert torch._C._functorch.get_dynamic_layer_stack_depth() == depth

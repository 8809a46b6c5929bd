"""The one accuracy rule (`torch_compat.accuracy_rule`): its callers agree, repros embed it verbatim,
integer outputs are compared exactly, and checks run on copies that keep strides and aliasing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch
import torch.fx

from pt2doctor.capture import torch_compat
from pt2doctor.capture.child import graph_recorder, graph_runs
from pt2doctor.capture.child.accuracy_probe import judge_graph
from pt2doctor.capture.torch_compat import accuracy_rule
from pt2doctor.model.minify import BackendKind, BackendSpec, Stage, TensorSpec
from pt2doctor.reduce.repro import ReproScript, render

# `.float()` and `dtype=` inside the graph: cast inputs alone, the reference stays float32 there.
FORWARD = '''def forward(self, x):
    big = torch.full((64,), 10000.0, dtype=torch.float32)
    return ((x.float() + big) - big,)
'''
# A backend that simplifies (x + big) - big to x: more exact than eager, so it differs from eager by
# eager's own rounding (up to half an ulp of 1e4, above the tolerance) but not from the fp64 value.
CANCEL = '''def cancel(gm, example_inputs):
    return lambda x: (x.float(),)
'''


class Cancels(torch.nn.Module):
    def forward(self, x):
        big = torch.full((64,), 10000.0, dtype=torch.float32)
        return ((x.float() + big) - big,)


def _x() -> torch.Tensor:
    torch.manual_seed(0)  # the repro's make_inputs
    return torch.randn(64)


def _rendered(tmp_path: Path) -> Path:
    script = ReproScript(stage=Stage.DYNAMO, forward_code=FORWARD, inputs=(TensorSpec((64,), (1,)),),
                         backend=BackendSpec(BackendKind.SOURCE, "cancel", CANCEL), accuracy=True)
    path = tmp_path / "repro.py"
    path.write_text(render(script))
    return path


def test_the_probe_the_recorder_and_the_repro_give_one_verdict_on_a_graph_with_its_own_float_dtypes(tmp_path):
    """Before the rule was one module, the recorder and the repro cast the inputs only: their
    reference stayed float32 here, so they judged by allclose alone and failed what the probe passed."""
    gm, x = torch.fx.symbolic_trace(Cancels()), _x()
    def compiled(x):
        return (x.float(),)  # what `cancel` returns

    assert not torch.allclose(gm(x)[0], compiled(x)[0], atol=1e-4, rtol=1e-4)  # eager's rounding shows
    assert judge_graph("0/0", gm, None, compiled, [x], 1e-4).verdict == "pass"

    recorder = graph_recorder.GraphRecorder(tmp_path / "run")
    graph_runs.accuracy_checked(recorder, "g0000", gm, compiled, 1e-4)(x)
    recorder.close()
    assert (tmp_path / "run" / "graphs" / "failures.jsonl").read_text() == ""

    repro = subprocess.run([sys.executable, str(_rendered(tmp_path))], capture_output=True, text=True, timeout=300)
    assert repro.returncode == 0 and "repro passed" in repro.stdout, repro.stderr[-2000:]


def test_a_repro_embeds_the_rule_modules_source_exactly(tmp_path):
    source = Path(accuracy_rule.__file__).read_text()
    assert torch_compat.accuracy_rule_source() == source
    assert f"\n{source}\n" in _rendered(tmp_path).read_text()
    assert "pt2doctor" not in "".join(line for line in source.splitlines() if line.startswith(("import", "from")))


def test_integer_and_bool_outputs_must_be_equal_with_the_same_dtype():
    same = torch_compat.same_outputs
    ints = torch.tensor([1, 2, 3])
    assert same([ints], [ints.clone()], None, 1e-4)
    assert not same([ints], [ints + 1], None, 1e-4)
    assert not same([ints.to(torch.int8)], [ints], None, 1e-4)  # a changed dtype, equal values
    assert not same([ints > 1], [ints > 2], None, 1e-4)
    assert not same([ints], [ints[:2]], None, 1e-4)
    assert same([torch.ones(3)], [torch.ones(3) + 1e-7], [torch.ones(3, dtype=torch.float64)], 1e-4)


def test_a_compiled_value_that_loses_eagers_infinity_or_nan_is_wrong_though_torchs_same_passes_it():
    """pytorch#189801: eager's elu(-1e-8) / 0 is -inf, Inductor's nan; RMSE against fp64 is nan either way, which
    `torch._dynamo.utils.same` passes."""
    from torch._dynamo.utils import same as torchs_same

    inf, nan = float("inf"), float("nan")
    eager, compiled = torch.tensor([-inf, -inf, 1.0]), torch.tensor([nan, -inf, 1.0])
    assert torchs_same(eager, compiled, eager.double(), tol=1e-4, equal_nan=True)
    assert not torch_compat.same_outputs([eager], [compiled], [eager.double()], 1e-4)
    assert not torch_compat.same_outputs([eager], [torch.tensor([inf, -inf, 1.0])], [eager.double()], 1e-4)
    assert not torch_compat.same_outputs([torch.ones(2)], [torch.tensor([inf, 1.0])], [torch.ones(2).double()], 1e-4)
    assert torch_compat.same_outputs([eager], [eager.clone()], [eager.double()], 1e-4)
    # compiled finite where eager overflows and the fp64 reference is finite: more exact, not wrong
    big = torch.tensor([3e38, 2.0], dtype=torch.float64)
    assert torch_compat.same_outputs([torch.tensor([inf, 2.0])], [big.float()], [big], 1e-4)
    # pytorch#197108: the mean of nothing is nan in eager and in fp64, 0 compiled
    assert not torch_compat.same_outputs([torch.tensor(nan)], [torch.tensor(0.0)],
                                         [torch.tensor(nan, dtype=torch.float64)], 1e-4)
    # a nan of eager's that fp64 does not have is left to `same`: compiled may be the more exact
    assert torch_compat.same_outputs([torch.tensor([nan, 1.0])], [torch.tensor([0.0, 1.0])],
                                     [torch.tensor([0.0, 1.0], dtype=torch.float64)], 1e-4)


def test_copies_keep_strides_storage_offsets_and_aliasing():
    base = torch.arange(12.0).reshape(3, 4)
    view, row = base[:, 1:3], base[1]
    for fp64 in (False, True):
        a, b = torch_compat.copy_inputs([view, row], fp64=fp64)
        assert (a.stride(), a.storage_offset(), b.storage_offset()) == (view.stride(), 1, 4)
        assert a.dtype == (torch.float64 if fp64 else torch.float32) and torch.equal(a, view.to(a.dtype))
        a.mul_(0)
        assert b.tolist() == [4.0, 0.0, 0.0, 7.0]  # the copies share one storage, as the inputs do
    assert base[1].tolist() == [4.0, 5.0, 6.0, 7.0]  # and never the program's


def test_the_fp64_copy_of_a_plain_module_also_casts_its_own_float_dtypes():
    x = _x()
    assert torch_compat.fp64_module(Cancels())(x.double())[0].dtype == torch.float64
    expected, reference = torch_compat.reference_runs(Cancels(), [x])
    assert expected[0].dtype == torch.float32 and torch.equal(reference[0], x.double())


def test_the_fp64_reference_runs_only_where_an_output_is_not_allclose_and_draws_as_the_call_drew(monkeypatch):
    """An fp64 run of a model costs more than its fp32 one, and most graphs pass: `same` answers from allclose first,
    so the reference is made only when that fails, on the inputs as they were, from the RNG state of the call."""
    made = []
    fp64_module = accuracy_rule.fp64_module
    monkeypatch.setattr(accuracy_rule, "fp64_module", lambda mod: made.append(mod) or fp64_module(mod))
    x = _x()
    expected, reference = torch_compat.reference_runs(Cancels(), [x], fp64=False)
    assert reference is None and accuracy_rule.same_as_fp64_reference(Cancels(), [x], expected, expected, 1e-4)
    assert not made
    # more exact than eager (eager's own rounding, above the tolerance): right by the fp64 reference, made once
    assert accuracy_rule.same_as_fp64_reference(Cancels(), [x], expected, (x.float(),), 1e-4) and len(made) == 1

    class Draws(torch.nn.Module):
        def forward(self, x):
            return (x + torch.rand(64),)

    state = torch_compat.rng_state()
    expected, _ = torch_compat.reference_runs(Draws(), [x], fp64=False)
    off = (expected[0] + 1e-3,)  # a compiled call that drew the same numbers and added an error
    torch.rand(100)  # the program goes on drawing
    assert not accuracy_rule.same_as_fp64_reference(Draws(), [x], expected, off, 1e-4, state=state)
    assert len(made) == 2


def test_integer_inputs_keep_their_recorded_range_where_their_values_are_not_saved():
    """Zeros hide a bug that needs an index above zero; values in the recorded range stay valid indices."""
    from pt2doctor.capture.child.graph_inputs import input_specs

    idx, mask, x = torch.tensor([[3, 7], [5, 4]]), torch.tensor([True, False]), torch.randn(2)
    gm = torch.fx.symbolic_trace(lambda idx, mask, x: (idx, mask, x))
    specs = input_specs(gm, [idx, mask, x])
    assert [s.bounds for s in specs] == [(3, 7), None, None]
    script = ReproScript(stage=Stage.DYNAMO, forward_code="def forward(self, idx, mask, x):\n    return (idx,)\n",
                         inputs=tuple(specs))
    namespace: dict = {"__name__": "repro", "__file__": "repro.py"}
    exec(render(script), namespace)
    made = namespace["make_inputs"]()[0]
    assert made.dtype == torch.int64 and made.shape == (2, 2)
    assert int(made.min()) >= 3 and int(made.max()) <= 7 and len(made.unique()) > 1

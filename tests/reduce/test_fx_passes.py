"""FX passes on tiny graphs with an in-process oracle: exact minimal graphs, no workers."""

from __future__ import annotations

import torch
import torch.fx
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2doctor.model.minify import TensorSpec
from pt2doctor.reduce.core import Outcome, ReductionProblem, reduce
from pt2doctor.reduce.fx_case import case_key, case_sort_key, initial_case, make_base
from pt2doctor.reduce.fx_passes import FX_PASSES


def _problem(gm, specs, interesting):
    def oracle(cases):
        return [Outcome.FAILS_SAME if interesting(c) else Outcome.PASSES for c in cases]

    return ReductionProblem(initial_case(make_base(gm, specs)), oracle, key=case_key, sort_key=case_sort_key, jobs=2)


def _has_relu(case):
    return any(op in ("torch.relu", "aten.relu.default") for op in case.ops)


def _chain(ops):
    def f(x, y):
        for op in ops:
            x = {"relu": torch.relu, "sin": torch.sin, "cos": torch.cos}[op](x) + y
        return (x, x * 2)

    return torch.fx.symbolic_trace(f)


SPECS = [TensorSpec((8, 6), (6, 1)), TensorSpec((8, 6), (6, 1))]


def test_relu_in_a_chain_reduces_to_the_single_relu_on_a_tiny_input():
    result = reduce(_problem(_chain(["sin", "cos", "relu", "sin", "cos"]), SPECS, _has_relu), FX_PASSES)
    assert result.ops == ("torch.relu",)
    assert result.inputs == (TensorSpec((1, 1), (1, 1)),)


def test_dtype_is_simplified_when_the_failure_persists():
    specs = [TensorSpec((4,), (1,), "float64"), TensorSpec((4,), (1,), "float64")]
    result = reduce(_problem(_chain(["cos", "relu"]), specs, _has_relu), FX_PASSES)
    assert [s.dtype for s in result.inputs] == ["float32"]


def test_symbolic_dims_stay_symbolic_in_new_inputs():
    specs = [TensorSpec((8, 6), (6, 1), dynamic=(0,)), TensorSpec((8, 6), (6, 1), dynamic=(0,))]
    problem = _problem(_chain(["sin", "relu"]), specs, lambda c: _has_relu(c) and c.inputs[0].shape[0] > 1)
    result = reduce(problem, FX_PASSES)
    assert result.ops == ("torch.relu",)
    assert result.inputs[0].dynamic == (0,)


def test_symbolic_sizes_are_not_shrunk_to_a_specialized_one():
    specs = [TensorSpec((8, 6), (6, 1), dynamic=(0,)), TensorSpec((8, 6), (6, 1), dynamic=(0,))]
    result = reduce(_problem(_chain(["sin", "relu"]), specs, _has_relu), FX_PASSES)
    assert result.ops == ("torch.relu",)
    assert (result.inputs[0].shape, result.inputs[0].dynamic) == ((2, 1), (0,))  # a size of 1 would be a constant


@settings(max_examples=15, deadline=None)
@given(st.lists(st.sampled_from(["sin", "cos", "relu"]), min_size=1, max_size=12).filter(lambda ops: "relu" in ops))
def test_result_still_fails_and_second_reduction_is_a_no_op(ops):
    first = reduce(_problem(_chain(ops), SPECS, _has_relu), FX_PASSES)
    assert _has_relu(first) and first.node_count == 1
    again = _problem(first.graph.owning_module or torch.fx.GraphModule(torch.nn.Module(), first.graph),
                     list(first.inputs), _has_relu)
    assert reduce(again, FX_PASSES).code == again.current.code
    assert again.stats.accepted == {}


def test_isolate_ops_asks_views_after_ops_that_compute_equally_rarely():
    from pt2doctor.reduce.fx_passes import isolate_ops

    aten = torch.ops.aten

    def f(x):
        return (aten.relu.default(aten.permute.default(x, [1, 0])),)

    asked = []

    def oracle(cases):
        asked.extend(c.ops for c in cases)
        return [Outcome.PASSES for _ in cases]

    gm = torch.fx.symbolic_trace(f)
    problem = ReductionProblem(initial_case(make_base(gm, SPECS[:1])), oracle, key=case_key, sort_key=case_sort_key,
                               jobs=1)
    isolate_ops(problem)
    assert asked == [("aten.relu.default",), ("aten.permute.default",)]  # graph order is the other way


def test_isolate_ops_asks_first_for_the_ops_the_failures_message_names():
    """A backend that rejects an op says which ("no kernel for softmax"): that op alone is the first candidate, however
    rare the others are and wherever it stands in the graph; a kernel's name (`cpp_fused_relu_0`) names no op."""
    from pt2doctor.reduce.fx_passes import isolate_ops

    def f(x, y):
        return (torch.softmax(torch.cos(torch.sin(x) + y), dim=1),)

    def asked_for(message):
        asked = []

        def oracle(cases):
            asked.extend(c.ops for c in cases)
            return [Outcome.PASSES for _ in cases]

        problem = ReductionProblem(initial_case(make_base(torch.fx.symbolic_trace(f), SPECS)), oracle, key=case_key,
                                   sort_key=case_sort_key, jobs=1)
        isolate_ops(problem, message)
        return asked

    assert asked_for("NotImplementedError: my_backend has no kernel for softmax")[0] == ("torch.softmax",)
    assert asked_for("LoweringException: target: aten.cos.default")[0] == ("torch.cos",)
    assert asked_for("error in cpp_fused_softmax_0") == asked_for("")  # no op named: rarest first, in graph order
    assert asked_for("")[0] == ("torch.sin",)


def test_only_nodes_cuts_the_graph_down_to_a_kernels_nodes_with_what_they_read_as_inputs():
    """runtime triage's starting point: the first bad kernel's fused nodes, alone."""
    from pt2doctor.reduce.fx_passes import only_nodes

    gm = _chain(["sin", "cos", "relu"])
    case = initial_case(make_base(gm, SPECS))
    names = [n.name for n in case.call_nodes]
    relu = next(n for n in names if n.startswith("relu"))
    add = names[names.index(relu) + 1]  # the add fused with it
    start = only_nodes(case, [relu, add])
    assert start is not None and start.ops == ("torch.relu", "_operator.add")
    assert len(start.inputs) == 2  # the cos-add's value it reads, and y
    assert only_nodes(case, ["not_a_node"]) is None


def test_the_compilers_node_names_are_found_in_the_graph_loaded_from_its_code():
    """A kernel's origins name nodes as the compiler did (the recorded code's names); the minifier's graph,
    traced again from that code, names them otherwise: `recorded_names` pairs them, call by call."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from pt2doctor.reduce.fx_load import recorded_names

    code = '''
def forward(self, arg0_1):
    relu_3 = torch.ops.aten.relu.default(arg0_1);  arg0_1 = None
    split_2 = torch.ops.aten.split.Tensor(relu_3, 2)
    getitem_5 = split_2[0]
    relu_4 = torch.ops.aten.relu.default(getitem_5)
    return (relu_4,)
'''

    def f(x):
        return torch.relu(torch.split(torch.relu(x), 2)[0])

    calls = [n for n in make_fx(f)(torch.randn(4)).graph.nodes if n.op == "call_function"]
    relu, split, getitem, *rest = [n.name for n in calls]  # tracing takes every item of the split: two getitems
    assert recorded_names(code, calls) == {"relu_3": relu, "split_2": split, "getitem_5": getitem,
                                           "relu_4": next(n for n in rest if n.startswith("relu"))}

"""Provenance: each recorded graph's nodes keep the user's call and source line they came from, also
after AOTAutograd decomposed the call into aten ops, and a loaded case still knows it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pt2doctor.capture.recorded_run import record_script
from pt2doctor.model.minify import NodeOrigin, describe_calls, source_calls
from pt2doctor.model.recording import read_index
from pt2doctor.reduce.fx_load import case_from_entry

# A composite loss that AOTAutograd decomposes (sub, neg, mul, add, clamp_min, mean; ge in the backward).
LOSS = """
    import torch
    import torch.nn.functional as F
    from torch._dynamo.backends.common import aot_autograd

    def passthrough(gm, example_inputs):
        return gm.forward

    def loss(x, y, t):
        return F.margin_ranking_loss(x, y, t, margin=0.5)

    x = torch.randn(4, requires_grad=True)
    y = torch.randn(4, requires_grad=True)
    compiled = torch.compile(loss, backend=aot_autograd(fw_compiler=passthrough, bw_compiler=passthrough))
    compiled(x, y, torch.ones(4)).backward()
"""


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    script = tmp_path_factory.mktemp("provenance") / "loss.py"
    script.write_text(textwrap.dedent(LOSS))
    assert record_script(script, script.parent / "run") == 0
    return script.parent / "run" / "graphs"


def test_decomposed_nodes_name_the_users_call_and_line(recording: Path) -> None:
    backward = next(e for e in read_index(recording) if e.aot_kind == "backward")
    assert len(backward.origins) == backward.nodes
    calls = source_calls(backward.origins)
    assert any(c.call == "torch.nn.functional.margin_ranking_loss" for c in calls)
    origin = next(c for c in calls if c.call.endswith("margin_ranking_loss"))
    assert origin.file.endswith("loss.py") and origin.line == 10 and "F.margin_ranking_loss(x, y, t" in origin.code
    assert "margin_ranking_loss at loss.py:10" in origin.describe()


def test_a_loaded_case_maps_the_provenance_onto_its_nodes(recording: Path) -> None:
    dynamo = next(e for e in read_index(recording) if e.stage.value == "dynamo")
    case = case_from_entry(recording, dynamo)
    assert case.origins and len(case.origins) == case.node_count
    assert all(isinstance(o, NodeOrigin) and o.line == 10 for o in case.origins)


def test_source_calls_name_each_call_once_and_keep_lines_no_call_names() -> None:
    line = dict(file="/w/train.py", line=14, code="return F.margin_ranking_loss(x, y, t)")
    origins = [NodeOrigin("aten.sub.Tensor", call="torch.nn.functional.margin_ranking_loss", **line),
               NodeOrigin("aten.neg.default", call="torch.nn.functional.margin_ranking_loss", **line),
               NodeOrigin("aten.ge.Scalar", **line),  # the partitioner's mask: only its line is known
               NodeOrigin("prims.convert_element_type.default", aten="aten._to_copy.default", file="/w/train.py",
                          line=15),
               NodeOrigin("aten.add.Tensor"),
               NodeOrigin("aten.var_mean.correction", call="torch.nn.modules.normalization.GroupNorm",
                          aten="aten.native_group_norm.default", file="/w/train.py", line=16)]
    assert [o.describe() for o in source_calls(origins)] == [
        "torch.nn.functional.margin_ranking_loss at train.py:14 (return F.margin_ranking_loss(x, y, t))",
        "aten._to_copy.default at train.py:15",
        # a decomposition's node names the op it decomposed: where a decomposition bug lives
        "torch.nn.modules.normalization.GroupNorm (decomposed from aten.native_group_norm.default) at train.py:16"]


def test_calls_on_one_line_are_said_with_that_line_once() -> None:
    line = dict(file="/w/train.py", line=15, code="return torch.arange(9) * torch.tensor(2)")
    calls = source_calls([NodeOrigin("prims.iota.default", call="torch.arange", aten="aten.arange.start", **line),
                          NodeOrigin("aten.mul.Tensor", call="operator.mul", **line),
                          NodeOrigin("aten.relu.default", call="torch.relu", file="/w/train.py", line=16,
                                     module="act")])
    assert describe_calls(calls) == ("torch.arange (decomposed from aten.arange.start), operator.mul at train.py:15 "
                                     "(return torch.arange(9) * torch.tensor(2)); torch.relu in act at train.py:16")

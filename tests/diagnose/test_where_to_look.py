"""Where to look in PyTorch's source: the look-up in the installed torch (real torch, no compile), the Dynamo
raise site taken from a traceback, and issue.md's list from a hand-built diagnosis."""

from __future__ import annotations

from pathlib import Path

import pytest

from pt2doctor.analysis.failures import dynamo_raise_site
from pt2doctor.diagnose.conclusions import conclude
from pt2doctor.diagnose.found import Found
from pt2doctor.model import Category
from pt2doctor.model.diagnosis import FailingStage, SourceLookup, SourceRef
from pt2doctor.model.minify import FailureKind, FailureSignature, MinifyResult, Stage, VerifyRuns
from pt2doctor.report.issue import write_bundle


@pytest.fixture(scope="module")
def sources():
    pytest.importorskip("torch")
    from pt2doctor.capture.torch_compat import sources

    return sources


def test_an_aten_op_resolves_to_its_inductor_lowering(sources) -> None:
    refs = sources.op_sources("aten.relu.default")
    lowering = next(r for r in refs if r.what == "Inductor lowering of aten.relu.default")
    assert lowering.file == "torch/_inductor/lowering.py" and lowering.line > 0 and lowering.function


def test_a_higher_order_op_resolves_to_its_lowering_and_its_definition(sources) -> None:
    """pytorch#145208 / #145050 on CUDA: a flex_attention backward graph failing to lower named no place in torch."""
    from pt2doctor.diagnose.where_to_look import aten_names

    assert aten_names(("higher_order.flex_attention_backward",)) == ("higher_order.flex_attention_backward",)
    assert aten_names(("torch.ops.higher_order.while_loop", "torch.ops.aten.rrelu_with_noise")) == (
        "higher_order.while_loop", "aten.rrelu_with_noise")  # an export program's culprits, as its code calls them
    refs = {r.what: r for r in sources.op_sources("higher_order.flex_attention_backward")}
    lowering = refs["Inductor lowering of flex_attention_backward"]
    assert lowering.file == "torch/_inductor/kernel/flex/flex_attention.py" and lowering.line > 0
    assert refs["higher-order op flex_attention_backward"].file == "torch/_higher_order_ops/flex_attention.py"


@pytest.mark.parametrize("name", ["aten.no_such_op.default", "torch.relu", "list.append", "relu",
                                  "higher_order.no_such_op"])
def test_a_name_that_is_no_aten_op_gives_nothing(sources, name: str) -> None:
    assert sources.op_sources(name) == []


def test_a_reduced_programs_torch_level_culprits_are_looked_up_by_their_aten_name(sources) -> None:
    """Issue 39, point 3: a program repro blames `torch.searchsorted`, which named no place in torch before."""
    from pt2doctor.diagnose.where_to_look import aten_names

    names = aten_names(("torch.searchsorted", "x.index_add_", "list.append"))
    assert names == ("aten.searchsorted", "aten.index_add_", "aten.index_add", "aten.append")
    refs = sources.where_to_look(names, None, None, None)
    assert any(r.what.startswith("Inductor lowering of aten.searchsorted") for r in refs)
    assert any("index_add" in r.what for r in refs) and not any("append" in r.what for r in refs)


def test_a_config_key_is_found_in_its_module_nested_ones_too(sources) -> None:
    ref = sources.config_ref("torch._inductor.config", "triton.persistent_reductions", "x")
    assert ref is not None and ref.file == "torch/_inductor/config.py"
    line = (Path(sources._torch_root()) / ref.file).read_text().splitlines()[ref.line - 1]
    assert line.lstrip().startswith("persistent_reductions") and line.startswith("    ")
    assert sources.config_ref("torch._inductor.config", "no_such_key", "x") is None


def test_a_bisected_lowering_is_the_lowering_of_the_nodes_op(sources) -> None:
    refs = sources.where_to_look(("aten.relu.default",), "inductor", "lowerings", "relu_1")
    lowering = [r for r in refs if r.file == "torch/_inductor/lowering.py"]
    assert len(lowering) == 1 and "CompilerBisector" in lowering[0].what


def test_a_subsystem_that_does_not_resolve_gives_nothing(sources) -> None:
    assert sources.where_to_look((), "inductor", "cudagraphs", None) == []
    assert sources.where_to_look((), "inductor", "post_grad_passes", "no_such_pass_anywhere") == []


def test_the_lookup_runs_in_a_child_and_comes_back_as_a_record(sources, tmp_path: Path) -> None:
    from pt2doctor.capture.source_lookup import look_up

    result = look_up(SourceLookup(str(tmp_path / "out.json"), ("aten.relu.default", "aten.no_such_op.default")))
    assert not result.note
    assert any(r.file == "torch/_inductor/lowering.py" for r in result.refs)


DYNAMO_ERROR = """Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/torch/_dynamo/convert_frame.py", line 2102, in _compile
  File "/venv/lib/python3.11/site-packages/torch/_dynamo/variables/builtin.py", line 1242, in call_unimplemented
  File "/venv/lib/python3.11/site-packages/torch/_dynamo/exc.py", line 727, in unimplemented
torch._dynamo.exc.Unsupported: Failed to trace builtin operator

from user code:
   File "/w/train.py", line 5, in f
"""


def test_the_dynamo_site_is_the_innermost_dynamo_frame_past_its_raising_helpers() -> None:
    assert dynamo_raise_site(DYNAMO_ERROR) == SourceRef(
        "where Dynamo raised it", "torch/_dynamo/variables/builtin.py", 1242, "call_unimplemented")


def test_a_traceback_without_dynamo_frames_has_no_dynamo_site() -> None:
    assert dynamo_raise_site('  File "/w/train.py", line 9, in <module>\n  File "/w/my_torch/_dynamo/x.py", '
                             'line 3, in g\n') is None


def test_issue_md_lists_where_to_look(tmp_path: Path) -> None:
    repro = tmp_path / "repro.py"
    repro.write_text("print('repro')\n")
    found = Found(command=("train.py",), category=Category.BACKEND_FAILURE, stage=FailingStage.INDUCTOR,
                  error="RuntimeError: boom", stages={"aot_eager_decomp_partition": "pass", "inductor": "fail"})
    found.minify = MinifyResult("g0001", Stage.AOT, FailureSignature(FailureKind.EXCEPTION, "RuntimeError: boom"), 9,
                                1, ("aten.relu.default",), ("aten.relu.default",), 12, 3, 4.5, True, str(repro),
                                verify_runs=VerifyRuns(2, 2))
    found.where_to_look = [SourceRef("Inductor lowering of aten.relu.default", "torch/_inductor/lowering.py", 7972,
                                     "make_pointwise.<locals>.inner")]
    conclude(found)
    diagnosis = found.freeze()
    assert diagnosis.where_to_look == tuple(found.where_to_look)
    write_bundle(diagnosis, None, tmp_path)
    issue = (tmp_path / "issue.md").read_text()
    assert "**Where to look** in PyTorch's source" in issue
    assert ("- Inductor lowering of aten.relu.default: `torch/_inductor/lowering.py:7972` "
            "(`make_pointwise.<locals>.inner`)") in issue


# the exception Dynamo raises, as the child recorded it: trimmed to the frame that re-raised it
TRIMMED = """Traceback (most recent call last):
  File "/w/train.py", line 9, in <module>
  File "/venv/lib/python3.11/site-packages/torch/_dynamo/eval_frame.py", line 1177, in compile_wrapper
torch._dynamo.exc.Unsupported: Failed to trace builtin operator
"""
# the `dynamo_error` artifact of the same run's trace (torch 2.13's header; the payload cut short)
ARTIFACT = ('V1126 01:36:27.889000 1225 torch/_dynamo/convert_frame.py:2134] {"artifact": {"name": "dynamo_error", '
            '"encoding": "string"}, "frame_id": 0, "frame_compile_id": 0, "attempt": 0, "has_payload": '
            '"c760d6aafcf4e8cfebf24beabfee3619"}\n' + "".join(f"\t{line}\n" for line in DYNAMO_ERROR.splitlines()))


def test_a_dynamo_failure_is_located_by_its_trace_artifact_not_the_trimmed_traceback(tmp_path: Path) -> None:
    from pt2doctor.diagnose.where_to_look import look_where
    from pt2doctor.model import SCHEMA, ExitInfo, Failure, Session

    (tmp_path / "trace").mkdir()
    (tmp_path / "trace" / "dedicated_log_torch_trace_x.log").write_text(ARTIFACT)
    found = Found(command=("train.py",), category=Category.GRAPH_BREAK, stage=FailingStage.DYNAMO)
    failure = Failure(Category.GRAPH_BREAK, "torch._dynamo.exc.Unsupported", "x", traceback=TRIMMED)
    found.session = Session(SCHEMA, "2.13", ("train.py",), ExitInfo(1), failures=(failure,))
    look_where(found, tmp_path, tmp_path)
    assert [r.file for r in found.where_to_look] == ["torch/_dynamo/variables/builtin.py"] and not found.notes


def test_an_ops_inductor_lowering_is_no_place_to_look_before_inductor(sources) -> None:
    """An export's run_decompositions failure (AOTAutograd's stage) named aten.any's Inductor lowering."""
    refs = [r.what for r in sources.where_to_look(("aten.any.default",), None, None, None, lowerings=False)]
    assert refs and not any(w.startswith("Inductor lowering of") for w in refs)
    assert any(w.startswith("Inductor lowering of") for w in [r.what for r in sources.op_sources("aten.any.default")])

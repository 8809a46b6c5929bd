"""Where to look in PyTorch's source: the look-up in the installed torch (real torch, no compile), the Dynamo
raise site taken from a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from pt2doctor.analysis.failures import dynamo_raise_site
from pt2doctor.model.diagnosis import SourceLookup, SourceRef


@pytest.fixture(scope="module")
def sources():
    pytest.importorskip("torch")
    from pt2doctor.capture.torch_compat import sources

    return sources


def test_an_aten_op_resolves_to_its_inductor_lowering(sources) -> None:
    refs = sources.op_sources("aten.relu.default")
    lowering = next(r for r in refs if r.what == "Inductor lowering of aten.relu.default")
    assert lowering.file == "torch/_inductor/lowering.py" and lowering.line > 0 and lowering.function


@pytest.mark.parametrize("name", ["aten.no_such_op.default", "torch.relu", "list.append", "relu"])
def test_a_name_that_is_no_aten_op_gives_nothing(sources, name: str) -> None:
    assert sources.op_sources(name) == []


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

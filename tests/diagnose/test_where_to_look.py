"""Where to look in PyTorch's source: the look-up in the installed torch (real torch, no compile), the Dynamo
raise site taken from a traceback, and issue.md's list from a hand-built diagnosis."""

from __future__ import annotations

from pathlib import Path

import pytest

from pt2doctor.analysis.failures import dynamo_raise_site, torch_raise_site
from pt2doctor.diagnose.conclusions import conclude
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.frozen import freeze
from pt2doctor.diagnose.reported import Reported
from pt2doctor.model import Category
from pt2doctor.model.diagnosis import FailingStage
from pt2doctor.model.minify import FailureKind, FailureSignature, MinifyResult, Stage, VerifyRuns
from pt2doctor.model.source_refs import SourceLookup, SourceRef
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


# pytorch#160449's shape (the corpus's random_random_stale_dynamic, reduced): Dynamo's model of a `random.Random`
RANDOM_PROGRAM = """import random
import torch

def f(x, rng):
    return x + rng.randint(1, 100)

compiled = torch.compile(f, dynamic=True, backend="eager")
for shape in [(1,), (1, 5), (2, 2)]:
    e, c = f(torch.zeros(shape), random.Random(0)), compiled(torch.zeros(shape), random.Random(0))
    torch.testing.assert_close(c, e)
"""


def test_a_dynamo_stage_program_names_the_trackers_that_traced_its_lines(sources, tmp_path: Path) -> None:
    """Issue 39, point 3: a Dynamo bug named no tracker. The look-up's child runs the reduced program and names the
    tracker methods that traced its compiled lines (RandomVariable's, not a tensor's or a builtin's), wherever the
    program ends (here it may fail its assert: the trackers are kept)."""
    from pt2doctor.capture.source_lookup import look_up

    program = tmp_path / "repro.py"
    program.write_text(RANDOM_PROGRAM)
    result = look_up(SourceLookup(str(tmp_path / "out.json"), program=str(program)))
    assert not result.note
    assert result.refs and len(result.refs) <= 4
    first = result.refs[0]
    assert first.function == "RandomVariable.call_method" and first.file.startswith("torch/_dynamo/variables/")
    assert first.what.startswith("Dynamo's RandomVariable, which traced repro.py:5") and first.line > 0
    assert not any(r.function.startswith(("TensorVariable", "BuiltinVariable", "ConstantVariable"))
                   for r in result.refs)


def test_what_the_program_reached_is_looked_up_beside_the_hand_over_and_joins_where_to_look(tmp_path: Path) -> None:
    """The `reached` step starts the look-up once the program is reduced; `where_to_look` takes its places (and no
    decomposition of the program's calls: a Dynamo-stage failure ran none). A failure a graph shows starts nothing."""
    from pt2doctor.diagnose.where_to_look import look_where, start_reached
    from pt2doctor.model.diagnosis import ProgramRepro

    program = tmp_path / "repro.py"
    program.write_text(RANDOM_PROGRAM)
    found = Found(command=("rng.py",), category=Category.ACCURACY, stage=FailingStage.DYNAMO)
    found.program = ProgramRepro(str(program), "AssertionError", "eager", "dynamo", 21, 11, 1, 0.1, 1.0, True,
                                 culprit_ops=("rng.randint",), backend_in_source=True)
    reached = start_reached(found, tmp_path)
    refs = look_where(found, tmp_path, tmp_path, reached=reached)
    assert [r.function for r in refs] == ["RandomVariable.call_method"], found.notes
    graph = Found(command=("g.py",), category=Category.ACCURACY, stage=FailingStage.INDUCTOR)
    assert start_reached(graph, tmp_path).result().refs == ()
    export = Found(command=("e.py",), category=Category.BACKEND_FAILURE, stage=FailingStage.AOT_AUTOGRAD,
                   program=ProgramRepro(str(program), "x", None, "export", 20, 9, 1, 0.1, 1.0, True))
    assert start_reached(export, tmp_path).result().refs == ()  # export's own entry, not the failure's, would differ


# pytorch#155745's shape (the corpus's input_mutation_alias_no_recompile, reduced): AOTAutograd compiled for two
# separate inputs, then called with two overlapping views of one base, one of them mutated
ALIAS_PROGRAM = """import torch

def f(x, y):
    x.mul_(2)
    return x + y

f_compiled = torch.compile(f, backend="aot_eager")
f_compiled(torch.ones(4), torch.ones(4))
base = torch.ones(8)
out = f_compiled(base[:4], base[2:6])
ref = torch.ones(8)
torch.testing.assert_close(out, f(ref[:4], ref[2:6]))
"""


def test_an_aot_stage_program_names_the_aotautograd_code_a_plain_compile_does_not_reach(sources, tmp_path):
    """Issue 39, point 3: an AOTAutograd-stage wrong result with a program repro named no place. The look-up's child
    runs a plain compile with the stage's backend, then the program, and names the AOTAutograd code only the program
    reached: the handling of mutated aliased inputs (`merge_view_inputs`), not the code every compile runs, not the
    wrappers AOTAutograd generates per graph."""
    from pt2doctor.capture.source_lookup import look_up

    program = tmp_path / "repro.py"
    program.write_text(ALIAS_PROGRAM)
    result = look_up(SourceLookup(str(tmp_path / "out.json"), program=str(program), reached_by="aot_eager"))
    assert not result.note
    functions = [r.function for r in result.refs]
    assert "merge_view_inputs" in functions and len(functions) <= 4, functions
    assert all(r.file.startswith("torch/_functorch/") and r.file.endswith(".py") for r in result.refs)
    assert "create_joint" not in functions and "<module>" not in functions  # every compile's; generated code


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


SEGFAULT = """Fatal Python error: Segmentation fault

Thread 0x00007fd6d33d56c0 (most recent call first):
  File "/venv/lib/python3.11/site-packages/torch/_inductor/compile_worker/subproc_pool.py", line 9 in wait

Current thread 0x00007fd6fb25cb80 (most recent call first):
  File "/venv/lib/python3.11/site-packages/torch/_ops.py", line 875 in __call__
  File "/venv/lib/python3.11/site-packages/torch/_functorch/_aot_autograd/runtime_wrappers.py", line 432 in f
  File "/venv/lib/python3.11/site-packages/torch/_dynamo/eval_frame.py", line 1446 in _fn
  File "/w/jvp.py", line 12 in <module>
"""


def test_a_crash_outside_dynamo_is_located_at_torchs_innermost_frame() -> None:
    """jvp_ldexp_aot_eager_segfault and export_unflattened_dynamic_reexport named no place in torch: the frame
    faulthandler dumped for the thread that took the signal (innermost first, `line N in f`), past `_ops.py`'s
    `__call__`; an export step's raise; a path whose package dir holds another `torch/` (`_functorch/`)."""
    assert torch_raise_site(SEGFAULT) == SourceRef(
        "where torch raised it", "torch/_functorch/_aot_autograd/runtime_wrappers.py", 432, "f")
    raised = ('Traceback (most recent call last):\n  File "/w/x.py", line 36, in <module>\n'
              '  File "/venv/site-packages/torch/export/dynamic_shapes.py", line 700, in _check\n'
              'torch._dynamo.exc.UserError: Detected mismatch\n')
    assert torch_raise_site(raised) == SourceRef("where torch raised it", "torch/export/dynamic_shapes.py", 700,
                                                 "_check")
    assert torch_raise_site('  File "/w/pytorch/train.py", line 9, in <module>\n') is None


def test_issue_md_lists_where_to_look(tmp_path: Path) -> None:
    repro = tmp_path / "repro.py"
    repro.write_text("print('repro')\n")
    found = Found(command=("train.py",), category=Category.BACKEND_FAILURE, stage=FailingStage.INDUCTOR,
                  error="RuntimeError: boom", stages={"aot_eager_decomp_partition": "pass", "inductor": "fail"})
    found.minify = MinifyResult("g0001", Stage.AOT, FailureSignature(FailureKind.EXCEPTION, "RuntimeError: boom"), 9,
                                1, ("aten.relu.default",), ("aten.relu.default",), 12, 3, 4.5, True, str(repro),
                                verify_runs=VerifyRuns(2, 2))
    lowering = SourceRef("Inductor lowering of aten.relu.default", "torch/_inductor/lowering.py", 7972,
                         "make_pointwise.<locals>.inner")
    reported = Reported(where_to_look=(lowering,))
    conclude(found)
    diagnosis = freeze(found, reported=reported)
    assert diagnosis.where_to_look == reported.where_to_look
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
    refs = look_where(found, tmp_path, tmp_path)
    assert [r.file for r in refs] == ["torch/_dynamo/variables/builtin.py"] and not found.notes


def test_an_ops_inductor_lowering_is_no_place_to_look_before_inductor(sources) -> None:
    """An export's run_decompositions failure (AOTAutograd's stage) named aten.any's Inductor lowering."""
    refs = [r.what for r in sources.where_to_look(("aten.any.default",), None, None, None, lowerings=False)]
    assert refs and not any(w.startswith("Inductor lowering of") for w in refs)
    assert any(w.startswith("Inductor lowering of") for w in [r.what for r in sources.op_sources("aten.any.default")])

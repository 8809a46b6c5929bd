"""Hand-built sessions: cause selection, value inference, ordering, and the what-if judge."""

from __future__ import annotations

import json
import math
from pathlib import Path

import msgspec

from pt2doctor.analysis.cookbook import action_items
from pt2doctor.analysis.recompiles import primary_failure, recompile_chains
from pt2doctor.analysis.whatif import Trial, TrialOutcome, judge, outputs_equal, propose_trials
from pt2doctor.capture.trace.guard_text import parse_guard_failure
from pt2doctor.model import SCHEMA, Compile, CompileId, ExitInfo, GraphBreak, Recompile, Session
from pt2doctor.model.outputs import (
    DictSummary,
    FloatSummary,
    OutputRecord,
    PySummary,
    SeqSummary,
    TensorSummary,
    number,
)
from pt2doctor.model.serialize import append_line, read_lines


def _session(**kw) -> Session:
    return Session(schema=SCHEMA, torch_version="2.13.0", command=(), exit=ExitInfo(code=0), **kw)


def _recompile(cid: str, *raws: str) -> Recompile:
    return Recompile("f", "t.py", 1, CompileId.parse(cid), raws[0], tuple(parse_guard_failure(r) for r in raws))


def test_a_failure_another_entry_accepts_is_not_the_cause() -> None:
    r2 = _recompile("0/2", "0/1: tensor 'x' dtype mismatch. expected Float, actual Double")
    r3 = _recompile("0/3", "0/2: tensor 'x' dtype mismatch. expected Double, actual Float", "0/1: L['n'] == 2",
                    "0/0: tensor 'x' size mismatch at index 0. expected 8, actual 9")
    assert primary_failure(r3, (r2, r3)).subject == "n"


def test_a_python_value_change_is_completed_from_the_next_recompile() -> None:
    session = _session(recompiles=(_recompile("0/1", "0/0: L['n'] == 3"), _recompile("0/2", "0/1: L['n'] == 4")))
    first = recompile_chains(session)[0].steps[0]
    assert first.cause.actual == "4" and first.cause_words == "Python int `n` changed 3 -> 4"


def test_torch_source_names_for_dynamic_sources() -> None:
    assert parse_guard_failure("0/0: tensor 'x' size mismatch at index 0. expected 1, actual 2").torch_source \
        == "L['x']"
    assert parse_guard_failure(
        "0/0: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 8, actual 9").torch_source == \
        "L['kwargs']['input_ids']"


def _break(line: int, count: int, frames: int) -> GraphBreak:
    return GraphBreak(reason="r", file="t.py", line=line, function="f", count=count,
                      compile_ids=tuple(CompileId(i, 0) for i in range(frames)))


def test_action_items_order_by_graphs_split_then_hits() -> None:
    items = action_items(_session(graph_breaks=(_break(1, 9, 1), _break(2, 2, 2), _break(3, 3, 1))))
    assert [i.where.line for i in items] == [2, 1, 3]


def test_a_break_whose_resumed_code_recompiles_ranks_first_and_one_frame_counts_once() -> None:
    printed = GraphBreak(reason="print", file="t.py", line=4, function="f", count=5,
                         compile_ids=(CompileId(0, 0), CompileId(0, 1)))  # one frame, compiled twice
    item = GraphBreak(reason="Tensor.item()", file="t.py", line=6, function="f", count=1,
                      compile_ids=(CompileId(0, 0),))
    resumed = tuple(Compile(CompileId(2, n), "torch_dynamo_resume_in_f_at_6", "t.py", 6, 3, 0.5, "ok")
                    for n in range(4))
    items = action_items(_session(graph_breaks=(printed, item), compiles=resumed))
    assert [(i.where.line, i.graphs_split, i.resumed_recompiles) for i in items] == [(6, 1, 3), (4, 1, 0)]


def test_trials_proposed_for_item_breaks_and_size_recompiles() -> None:
    gb = GraphBreak(reason="Unsupported Tensor.item() call with capture_scalar_outputs=False", file="t.py",
                    line=3, function="f", count=1)
    session = _session(graph_breaks=(gb,), recompiles=(
        _recompile("0/1", "0/0: tensor 'x' size mismatch at index 0. expected 8, actual 9"),))
    trials = {t.name: t for t in propose_trials(session)}
    assert json.loads(trials["item"].overrides) == {"dynamo_config": {"capture_scalar_outputs": True}}
    assert json.loads(trials["mark_dynamic"].overrides) == {"mark_dynamic": ["L['x']:0"]}
    assert "dynamic=True" in trials


def test_judge_refutes_when_outputs_differ_even_if_breaks_go_down() -> None:
    trial = Trial("item", "c", "{}", "graph_breaks", "b")
    before = _session(graph_breaks=(_break(1, 1, 1),))
    assert judge(trial, before, _session(), True).outcome is TrialOutcome.VERIFIED
    assert judge(trial, before, _session(), False).outcome is TrialOutcome.REFUTED
    assert judge(trial, before, before, True).outcome is TrialOutcome.REFUTED


def test_outputs_equal_is_close_not_exact() -> None:
    def rec(v: float) -> list[OutputRecord]:
        return [OutputRecord(0, 0, TensorSummary("torch.float32", (1,), (number(v),)))]
    assert outputs_equal(rec(1.0), rec(1.0 + 1e-7)) is True
    assert outputs_equal(rec(1.0), rec(2.0)) is False
    assert outputs_equal([], rec(1.0)) is None


def test_outputs_survive_the_child_to_parent_record_nan_and_infinity_included(tmp_path: Path) -> None:
    value = SeqSummary((TensorSummary("torch.float32", (3,), tuple(map(number, (1.0, math.nan, -math.inf)))),
                        FloatSummary(number(math.inf)), PySummary("nan"), DictSummary({"k": PySummary(None)})))
    with open(tmp_path / "outputs.jsonl", "w") as handle:  # as the child writes it (capture.child.overrides)
        append_line(handle, OutputRecord(0, 0, value))
    (read,) = read_lines(tmp_path / "outputs.jsonl", OutputRecord)  # as the parent reads it (workflows.whatif)
    assert read == OutputRecord(0, 0, value) and outputs_equal([read], [OutputRecord(0, 0, value)]) is True
    other = msgspec.structs.replace(value, items=(value.items[0], FloatSummary(number(math.nan)), *value.items[2:]))
    assert outputs_equal([read], [OutputRecord(0, 0, other)]) is False  # an infinity is not a NaN
    assert outputs_equal([read], [OutputRecord(0, 0, FloatSummary(number(math.nan)))]) is False

"""The trace reader and session fold on real TORCH_TRACE fixtures (see fixtures/traces/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pt2doctor.capture.trace.session_builder import build_session
from pt2doctor.capture.trace.trace_import import session_from_trace
from pt2doctor.capture.trace.trace_reader import TraceCounters, TraceError, read_trace
from pt2doctor.model import GuardKind

TRACES = Path(__file__).parents[1] / "fixtures" / "traces"


def test_real_trace_gives_breaks_recompiles_and_compiles():
    session = session_from_trace(TRACES / "toy_and_recompiles.log")
    assert session.trace.unreadable == 0
    assert session.torch_version == "2.13.0+cpu"
    by_line = {b.line: b for b in session.graph_breaks}
    assert set(by_line) == {5, 6}
    assert by_line[5].function == "toy_example" and by_line[5].count == 1
    assert "print" in by_line[5].reason and by_line[5].gb_id == "GB0059"
    assert by_line[6].break_type == "Data-dependent branching"
    assert [str(r.compile_id) for r in session.recompiles] == ["4/1", "4/2"]
    first = session.recompiles[0].guard_failures[0]
    assert (first.kind, first.subject, first.dim, first.expected, first.actual) == (GuardKind.SIZE, "x", 0, "4", "5")
    assert {g.kind for g in session.recompiles[1].guard_failures} == {GuardKind.VALUE, GuardKind.DTYPE}
    assert len(session.compiles) == 7 and session.compile_time_s > 0


def test_truncated_trace_is_read_as_far_as_it_goes():
    full = session_from_trace(TRACES / "toy_and_recompiles.log")
    cut = session_from_trace(TRACES / "truncated.log")
    assert 0 < len(cut.compiles) < len(full.compiles)
    assert cut.trace.unreadable <= 1  # at most the half-written last line


def test_corrupted_lines_are_counted_and_skipped():
    counters = TraceCounters()
    facts = build_session(read_trace(TRACES / "corrupted.log", counters))
    assert counters.unreadable == 4
    assert len(facts.graph_breaks) == 2 and len(facts.recompiles) == 2


def test_strict_reading_fails_on_the_first_bad_line():
    with pytest.raises(TraceError, match="unreadable trace line"):
        list(read_trace(TRACES / "corrupted.log", strict=True))


def test_directory_with_several_rank_files(tmp_path: Path):
    data = (TRACES / "toy_and_recompiles.log").read_bytes()
    for rank in (0, 1):
        (tmp_path / f"dedicated_log_torch_trace_rank_{rank}_abc.log").write_bytes(data)
    session = session_from_trace(tmp_path)
    assert session.trace.ranks == (0, 1)
    assert len(session.trace.files) == 2
    assert {b.line: b.count for b in session.graph_breaks} == {5: 2, 6: 2}


def test_a_trace_cut_before_its_first_finished_compile_does_not_claim_torch_was_never_imported(tmp_path):
    from pt2doctor.analysis.verdict import verdict_for
    from pt2doctor.capture.trace.trace_import import session_from_trace

    lines = (TRACES / "toy_and_recompiles.log").read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if '"compilation_metrics"' in line)
    (tmp_path / "cut.log").write_text("".join(lines[:cut]))
    headline = verdict_for(session_from_trace(tmp_path / "cut.log")).headline
    assert headline.startswith("OK, but the trace holds no") and "never imported torch" not in headline


def test_the_same_program_reads_the_same_on_torch_2_11_and_2_13() -> None:
    from pt2doctor.cli.output import load_session
    from pt2doctor.report.document import build_report

    traces = Path(__file__).parents[1] / "fixtures" / "traces"
    facts = []
    for name in ("toy_and_recompiles.log", "toy_and_recompiles_torch211.log"):
        report = build_report(load_session(traces / name))
        s = report.session
        facts.append((s.graphs, s.ops, [(b.line, b.break_type) for b in s.graph_breaks],
                      [step.cause_words for chain in report.recompiles for step in chain.steps if step.cause],
                      [chain.fixes for chain in report.recompiles]))
    assert facts[0] == facts[1]
    assert facts[0][0] == 7 and len(facts[0][2]) == 2 and len(facts[0][3]) == 2


def test_compiles_after_a_dynamo_reset_are_told_apart_in_a_trace_without_the_childs_marks():
    """Issue #30: after `torch._dynamo.reset()` torch starts again at 0/0; a compile id that starts a second
    time begins a new generation, so no compile is folded into another."""
    session = session_from_trace(TRACES / "dynamo_reset.log")
    assert [(str(c.compile_id), c.function) for c in session.compiles] == [
        ("0/0", "f"), ("1/0", "g"), ("0/1", "f"), ("0/0@1", "f"), ("1/0@1", "g"), ("0/1@1", "f")]
    assert [str(r.compile_id) for r in session.recompiles] == ["0/1", "0/1@1"] and session.frames == 4
    # the entry whose guard failed is the one of the recompile's own round
    assert [str(r.guard_failures[0].failed_entry) for r in session.recompiles] == ["0/0", "0/0@1"]

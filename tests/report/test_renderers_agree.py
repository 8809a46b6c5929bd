"""The terminal and the HTML page show the cause and the fix that analysis chose, and so the same ones.

Sessions: a real trace (torch 2.13, `toy_and_recompiles`) and hand-built ones with guard text as torch
wrote it, including recompiles whose first listed failure is not the cause (the newest cache entry
failed on something an older entry was compiled for)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pt2doctor.capture.trace.guard_text import parse_guard_failure
from pt2doctor.cli.output import load_session
from pt2doctor.model import SCHEMA, CompileId, ExitInfo, LimitHit, Recompile, Session
from pt2doctor.model.report_inputs import HtmlInputs
from pt2doctor.report.document import Report, build_report
from pt2doctor.report.html_data import page_data
from pt2doctor.report.terminal import render_terminal

TRACE = Path(__file__).parents[1] / "fixtures" / "traces" / "toy_and_recompiles.log"
PARAM = ("tensor 'self._modules['model']._modules['norm']._parameters['weight']' dtype mismatch. expected Float, "
         "actual BFloat16. Guard failed on a parameter, consider using x = False.")
CALLS = ("self.calls == {n}     # self.calls += 1  # mp/t/m.py:11 in forward (HINT: torch.compile considers "
         "integer attributes of the nn.Module to be static.)")


def _recompile(cid: str, *raws: str) -> Recompile:
    return Recompile("forward", "/t/m.py", 1, CompileId.parse(cid), raws[0],
                     tuple(parse_guard_failure(r) for r in raws))


def _session(*recompiles: Recompile, limit: LimitHit | None = None) -> Session:
    return Session(schema=SCHEMA, torch_version="2.13.0", command=("m.py",), exit=ExitInfo(code=0),
                   recompiles=recompiles, limit_hits=(limit,) if limit else ())


def _sessions() -> dict[str, Session]:
    return {
        "real trace": load_session(TRACE),
        "first listed failure is not the cause": _session(_recompile(
            "0/3", "0/2: GLOBAL_STATE changed: deterministic_algorithms ",
            "0/1: GLOBAL_STATE changed: autocast(cpu)_enabled ", f"0/0: {PARAM}")),
        "module int with a limit hit": _session(
            _recompile("0/1", "0/0: " + CALLS.format(n=0)),
            _recompile("0/2", "0/1: " + CALLS.format(n=1), "0/0: " + CALLS.format(n=0)),
            limit=LimitHit("forward", "/t/m.py", 1, CompileId(0, 3), "recompile_limit", "hit", fatal=True,
                           guard_failures=(parse_guard_failure("0/2: " + CALLS.format(n=2)),))),
    }


@pytest.fixture(scope="module", params=list(_sessions()))
def report(request: pytest.FixtureRequest) -> Report:
    return build_report(_sessions()[request.param])


def test_each_chain_has_causes_and_fixes(report: Report) -> None:
    assert report.recompiles and all(chain.fixes for chain in report.recompiles)
    assert all(step.cause is not None and step.fix in chain.fixes
               for chain in report.recompiles for step in chain.steps)


def test_terminal_and_html_show_the_causes_and_fixes_analysis_chose(report: Report) -> None:
    terminal = render_terminal(report, width=10_000)
    html = page_data(report, HtmlInputs())["recompiles"]
    assert [(r["function"], r["file"], r["line"]) for r in html] == [(c.function, c.file, c.line)
                                                                       for c in report.recompiles]
    for chain, shown in zip(report.recompiles, html, strict=True):
        assert shown["fixes"] == list(chain.fixes)
        assert [e["cause"] for e in shown["entries"]] == [s.cause_words for s in chain.steps if s.cause]
        shown_fixes = [e["fix"] for e in shown["entries"] if e["fix"]] + shown["other_fixes"]
        assert sorted(shown_fixes) == sorted(chain.fixes)  # each once, under the recompile it fixes
        for step in chain.steps:
            assert step.cause is not None and step.cause_words and step.cause_words in terminal
    terminal_fixes = [line.split("fix: ", 1)[1] for line in terminal.splitlines() if line.strip().startswith("fix: ")]
    assert sorted(terminal_fixes) == sorted(fix for chain in report.recompiles for fix in chain.fixes)


def test_the_terminal_says_why_the_call_at_the_limit_wanted_to_recompile() -> None:
    report = build_report(_sessions()["module int with a limit hit"])
    (chain,) = report.recompiles
    assert chain.limit_cause == "Python int `self.calls` changed: the graph was specialized to self.calls == 2"
    assert f"it wanted to recompile because {chain.limit_cause}" in render_terminal(report, width=10_000)


def test_a_fix_is_shown_under_the_recompile_it_fixes() -> None:
    lines = render_terminal(build_report(_sessions()["real trace"]), width=10_000).splitlines()
    size_fix = next(i for i, line in enumerate(lines) if "fix: mark the dimension dynamic" in line)
    int_cause = next(i for i, line in enumerate(lines) if "Python int `n` changed" in line)
    assert "size at dim 0 changed" in lines[size_fix - 1] and size_fix < int_cause


def test_the_cause_is_not_simply_the_first_listed_failure() -> None:
    report = build_report(_sessions()["first listed failure is not the cause"])
    (chain,) = report.recompiles
    cause = chain.steps[0].cause
    assert cause is not None and cause.subject == "self.model.norm.weight"
    assert "parameters changed dtype" in chain.fixes[0]


def test_a_run_directory_with_spaces_is_quoted_in_the_re_render_hint() -> None:
    from dataclasses import replace

    session = replace(_sessions()["module int with a limit hit"], run_dir="/tmp/my runs/a <b>")
    assert "pt2doctor report '/tmp/my runs/a <b>'" in render_terminal(build_report(session), width=10_000)

"""`compare`, `check` and the `compile_budget` pytest marker, on one program run under two Dynamo configs
(tests/scripts/config_change.py: the changed config adds a graph break and recompiles)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clihelp import SCRIPTS, CliRun, pt2doctor

pytest_plugins = ["pytester"]
PROGRAM = str(SCRIPTS / "config_change.py")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base, changed = tmp_path_factory.mktemp("base"), tmp_path_factory.mktemp("changed")
    assert pt2doctor("run", "--out", str(base), PROGRAM).code == 0
    assert pt2doctor("run", "--out", str(changed), PROGRAM, "changed").code == 0
    return base, changed


def _compare(*args: str) -> CliRun:
    return pt2doctor("compare", *args)


def test_a_config_change_shows_its_new_graph_break_and_recompiles(runs):
    base, changed = runs
    result = _compare("--json", str(base), str(changed))
    assert result.code == 1
    changes = json.loads(result.stdout)["changes"]
    added_break = [c for c in changes if c["kind"] == "graph_break" and c["direction"] == "added"]
    assert len(added_break) == 1 and "config_change.py:14" in added_break[0]["subject"]
    assert "capture_scalar_outputs" in added_break[0]["detail"]
    more = next(c for c in changes if c["kind"] == "recompile" and c["subject"].startswith("scale (")
                and c["direction"] == "changed")
    assert (more["before"], more["after"]) == ("1x", "2x") and "size at dim 0 changed 5 -> 6" in more["detail"]
    assert not [c for c in changes if c["kind"] == "failure"]
    text = _compare(str(base), str(changed)).stdout
    assert "Graph breaks:\n  + " in text and "1x -> 2x" in text


def test_a_run_compared_with_itself_reports_nothing(runs):
    base, _ = runs
    result = _compare(str(base), str(base / "session.json"))
    assert result.code == 0 and "No differences in compilation." in result.stdout


def test_a_slower_compile_alone_is_shown_but_is_no_difference(runs, tmp_path):
    """CI ran the guide's toy example twice on a loaded machine: 0.30 s -> 0.88 s of compilation, and compare
    said the two runs differ. Wall-clock time is shown; only what compiled counts."""
    base, _ = runs
    session = json.loads((base / "session.json").read_text())
    for c in session["compiles"]:
        c["time_s"] = 3 * (c["time_s"] or 0.0) + 1.0
    (tmp_path / "session.json").write_text(json.dumps(session))
    result = _compare(str(base), str(tmp_path))
    assert result.code == 0, result.stdout
    assert "No differences in compilation." in result.stdout and "Compile time (wall-clock" in result.stdout
    changes = json.loads(_compare("--json", str(base), str(tmp_path)).stdout)["changes"]
    assert any(c["kind"] == "compile_time" for c in changes)


def test_compare_rejects_what_is_not_a_run(tmp_path, runs):
    (tmp_path / "notes.txt").write_text("hello\n")
    result = _compare(str(runs[0]), str(tmp_path / "notes.txt"))
    assert result.code == 64 and "Traceback" not in result.stderr


def test_check_fails_over_budget_and_on_what_is_new_since_the_baseline(runs, tmp_path):
    base, _ = runs
    over = pt2doctor("check", "--max-graph-breaks", "0", "--baseline", str(base), "--json",
                     "--out", str(tmp_path / "c"), PROGRAM, "changed")
    assert over.code == 1, over.stderr[-2000:]
    overruns = json.loads(over.stdout)["overruns"]
    assert {o["what"] for o in overruns} == {"graph_breaks", "new graph break", "new recompile"}
    breaks = next(o for o in overruns if o["what"] == "graph_breaks")
    assert breaks["limit"] == 0 and breaks["actual"] == 3 and "config_change.py:14" in breaks["evidence"][0]
    assert (tmp_path / "c" / "session.json").is_file()  # the run is kept, as with `run`
    assert json.loads(over.stdout)["exit_code"] == 1 and over.stderr.splitlines()[-1].startswith("check: OVER ")
    within = pt2doctor("check", "--max-recompiles", "1", "--out", str(tmp_path / "w"), PROGRAM)
    assert within.code == 0 and within.stdout.splitlines()[0] == "check: within the budget"


def test_check_tells_a_crashed_script_from_a_budget_overrun_by_its_status_and_its_first_line(tmp_path):
    """Issue 40, point 2: a CI job branches on 4 (the script failed, nothing judged) against 1 (over budget)."""
    crashes = tmp_path / "crashes.py"
    crashes.write_text("import torch\n"
                       "f = torch.compile(lambda x: print('hi') or x + 1, backend='eager')\n"
                       "f(torch.ones(2))\n"
                       "raise SystemExit('the script gave up')\n")
    text = pt2doctor("check", "--max-graph-breaks", "0", "--out", str(tmp_path / "t"), str(crashes))
    assert text.code == 4, text.stderr[-2000:]
    assert text.stdout.splitlines()[0].startswith("check: THE SCRIPT FAILED, nothing was judged (exit 4)")
    as_json = pt2doctor("check", "--max-graph-breaks", "0", "--json", "--out", str(tmp_path / "j"), str(crashes))
    doc = json.loads(as_json.stdout)
    assert as_json.code == 4 and doc["exit_code"] == 4 and doc["script_exit_code"] == 1


def test_check_without_a_budget_is_a_usage_error_before_anything_runs(tmp_path):
    result = pt2doctor("check", "--out", str(tmp_path / "x"), PROGRAM)
    assert result.code == 64 and "at least one budget" in result.stderr
    assert not (tmp_path / "x" / "session.json").exists()


def test_the_compile_budget_marker_fails_a_test_that_breaks_the_graph(pytester: pytest.Pytester):
    pytester.makepyfile(test_model="""
        import pytest
        import torch

        @pytest.mark.compile_budget(graph_breaks=0)
        def test_breaks():
            torch.compile(lambda x: print("hi") or x + 1, backend="eager")(torch.ones(2))

        @pytest.mark.compile_budget(graph_breaks=0, recompiles=0)
        def test_clean():
            torch.compile(lambda x: x * 2, backend="eager")(torch.ones(2))

        def test_unmarked():
            torch.compile(lambda x: print("hi") or x, backend="eager")(torch.ones(2))
    """)
    # the module by name, whether or not this environment installed the entry point (tested below)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:pt2doctor",
                                           "-p", "pt2doctor.pytest_plugin")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*over the compile budget:*", "*graph_breaks: * (allowed 0)*", "*print*"])


def test_the_plugin_is_an_installed_entry_point_that_imports_no_torch():
    import subprocess
    import sys
    from importlib.metadata import entry_points

    assert [e.value for e in entry_points(group="pytest11") if e.name == "pt2doctor"] == ["pt2doctor.pytest_plugin"]
    probe = "import sys, pt2doctor.pytest_plugin; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip() == "False"


def test_two_runs_of_the_guides_toy_example_compare_equal(tmp_path):
    """Issue 40, point 5: the budgets guide shows two runs of the toy example comparing equal; unseeded, they took its
    data-dependent branch differently about 40% of the time."""
    toy = str(Path(__file__).parents[2] / "src" / "pt2doctor" / "examples" / "toy_example.py")
    for name in ("a", "b"):
        assert pt2doctor("run", "--out", str(tmp_path / name), toy).code == 0
    same = _compare(str(tmp_path / "a"), str(tmp_path / "b"))
    assert same.code == 0 and "No differences in compilation." in same.stdout, same.stdout

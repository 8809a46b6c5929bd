"""`pt2doctor run` end to end: real torch in a child process, through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clihelp import SCRIPTS, pt2doctor

EXAMPLES = Path(__file__).parents[2] / "src" / "pt2doctor" / "examples"


@pytest.mark.parametrize(
    ("script", "category", "line", "exit_code"),
    [
        ("fullgraph_break.py", "graph_break", 5, 1),
        ("backend_failure.py", "backend_failure", 5, 1),
        ("graph_raises.py", "backend_failure", 6, 1),
        ("recompile_limit.py", "recompilation", 13, 1),
        ("user_error.py", "user_error", 9, 1),
        ("accuracy_assert.py", "accuracy", 9, 1),
        ("abort.py", "runtime_crash", 6, 134),
        ("segfault.py", "runtime_crash", 6, 139),
        ("syntax_error.py", "user_error", 2, 1),
    ],
)
def test_each_failure_is_classified_with_its_user_line(run_json, script, category, line, exit_code):
    run = run_json(script)
    assert run.code == exit_code, run.stderr[-2000:]
    doc = run.doc
    failure = doc["failures"][0]
    assert failure["category"] == category
    assert failure["file"] == str(SCRIPTS / script) and failure["line"] == line
    assert doc["verdict"]["headline"].startswith(f"FAILED ({category})")
    assert (run.out_dir / "session.json").exists()


def test_fullgraph_break_is_also_listed_as_a_fatal_graph_break(run_json):
    (gb,) = run_json("fullgraph_break.py").doc["graph_breaks"]
    assert gb["line"] == 5 and gb["fatal"] and any("reorderable_logging_functions" in h for h in gb["hints"])


def test_a_frame_dynamo_skipped_is_a_graph_break_not_a_failure(run_json):
    """Without fullgraph, a break Dynamo cannot resume from skips the frame; the program goes on."""
    run = run_json("skipped_frame.py")
    doc = run.doc
    assert run.code == 0 and doc["failures"] == []
    (gb,) = doc["graph_breaks"]
    assert gb["line"] == 9 and gb["function"] == "helper" and not gb["fatal"]
    assert "fatal" not in run.stderr


def test_a_script_that_changes_directory_is_observed_and_recorded_in_a_relative_out_dir(tmp_path):
    run = pt2doctor("run", "--record", "--json", "--out", "rel", str(SCRIPTS / "chdir.py"), cwd=tmp_path)
    assert run.code == 0, run.stderr[-2000:]
    assert len(run.doc["compiles"]) == 1 and run.doc["failures"] == []
    assert (tmp_path / "rel" / "graphs" / "index.jsonl").is_file()


def test_signal_death_records_the_signal(run_json):
    doc = run_json("segfault.py").doc
    assert doc["exit"] == {"code": None, "signal": 11, "timed_out": False, "interrupted": False}


def test_timeout_stops_the_script_and_names_the_line_it_hung_on(tmp_path):
    # long enough for the compile before the loop to finish on a loaded machine
    run = pt2doctor("run", "--json", "--timeout", "20", "--out", str(tmp_path), str(SCRIPTS / "hang.py"))
    assert run.code == 124
    doc = run.doc
    assert doc["exit"]["timed_out"] is True
    failure = doc["failures"][0]
    assert failure["category"] == "timeout"
    assert failure["file"] == str(SCRIPTS / "hang.py") and failure["line"] in (7, 8)  # inside the loop


def test_script_exit_code_is_mirrored(run_json):
    run = run_json("exit3.py")
    assert run.code == 3 and run.doc["exit"]["code"] == 3


def test_kernel_failure_from_inductor_cpp_codegen(run_json):
    run = run_json("kernel_failure.py")
    failure = run.doc["failures"][0]
    assert failure["category"] == "kernel_failure"
    assert failure["file"] == str(SCRIPTS / "kernel_failure.py")


def test_each_recompile_cause_in_plain_words(run_json):
    doc = run_json("recompile_causes.py").doc
    # session.json keeps torch's facts; the words are analysis's, in the findings' evidence (`[id] words <- line`)
    kinds = {r["function"]: r["guard_failures"][0]["kind"] for r in doc["recompiles"]}
    assert kinds == {"size_fn": "size", "dtype_fn": "dtype", "stride_fn": "stride", "grad_fn": "requires_grad",
                     "value_fn": "value", "global_fn": "global"}
    texts = {f["title"].split()[0]: f["evidence"][0].split("] ", 1)[1].split("   <- ")[0]
             for f in doc["findings"] if f["kind"] == "recompile"}
    assert texts["size_fn"] == "input `x`: size at dim 0 changed 4 -> 5"
    assert texts["dtype_fn"] == "input `x`: dtype changed float32 -> float64"
    assert "stride at dim 0 changed 4 -> 1" in texts["stride_fn"] and "non-contiguous" in texts["stride_fn"]
    assert texts["grad_fn"] == "input `x`: requires_grad changed False -> True"
    assert "`n`" in texts["value_fn"] and "n == 3" in texts["value_fn"]
    assert "`FLAG`" in texts["global_fn"]
    value = next(r for r in doc["recompiles"] if r["function"] == "value_fn")
    assert value["guard_failures"][0]["source"]["line"] == 25  # `return x * n`


def test_toy_example_summary_and_breaks(tmp_path):
    run = pt2doctor("run", "--out", str(tmp_path), str(EXAMPLES / "toy_example.py"))
    assert run.code == 0
    assert run.stdout.splitlines()[:3] == ["woo"] * 3  # the script's own stdout passes through, first
    assert "graph breaks     2" in run.stdout
    assert "toy_example.py:7" in run.stdout and "toy_example.py:8" in run.stdout
    assert "torch.where" in run.stdout
    again = pt2doctor("report", str(tmp_path))
    assert again.code == 0 and "toy_example.py:7" in again.stdout
    raw = pt2doctor("report", "--json", str(tmp_path / "trace"))
    assert raw.code == 0 and {b["line"] for b in raw.doc["graph_breaks"]} == {7, 8}


def test_argv_stdin_and_no_compile_message(tmp_path):
    run = pt2doctor("run", "--out", str(tmp_path), str(SCRIPTS / "no_compile.py"), "--flag", "x", stdin="hello\n")
    assert run.code == 0
    assert "args: ['--flag', 'x']" in run.stdout and "stdin: hello" in run.stdout
    assert "nothing was compiled: the script never imported torch" in run.stdout


def test_with_json_what_the_script_printed_is_shown_on_stderr_and_kept_apart_from_its_warnings(tmp_path):
    """stdout holds the JSON, so the script's stdout is shown on stderr, where its warnings also go (torch's
    "Failed to initialize NumPy" where numpy is missing): stdout.txt keeps what it printed, and only that."""
    run = pt2doctor("run", "--json", "--out", str(tmp_path), str(SCRIPTS / "two_streams.py"))
    assert run.code == 0 and run.doc["exit"]["code"] == 0
    assert (tmp_path / "stdout.txt").read_text().splitlines() == ["first line", "second line"]
    for line in ("first line", "second line", "to stderr", "a warning of the program's own"):
        assert line in run.stderr


@pytest.mark.parametrize("target", ["missing.py", "."])
def test_bad_script_is_a_usage_error_without_traceback(tmp_path, target):
    run = pt2doctor("run", "--out", str(tmp_path), target, cwd=tmp_path)
    assert run.code == 64
    assert "Traceback" not in run.stderr
    assert "no such script" in run.stderr or "is a directory" in run.stderr


@pytest.mark.parametrize("command", ["run", "diagnose", "accuracy", "recompiles"])
def test_a_timeout_that_is_not_positive_is_a_usage_error(command):
    run = pt2doctor(command, "--timeout", "-1", str(SCRIPTS / "call_counts.py"))
    assert run.code == 64 and "--timeout" in run.stderr


def test_report_rejects_a_path_without_session_or_trace(tmp_path):
    run = pt2doctor("report", str(tmp_path))
    assert run.code == 64 and "no session.json" in run.stderr and "Traceback" not in run.stderr


def test_report_rejects_a_file_that_is_not_a_trace(tmp_path):
    run = pt2doctor("report", str(SCRIPTS / "call_counts.py"))
    assert run.code == 64 and "is not a TORCH_TRACE" in run.stderr


def test_report_strict_on_corrupted_trace_exits_65():
    corrupted = Path(__file__).parents[1] / "fixtures" / "traces" / "corrupted.log"
    lenient = pt2doctor("report", str(corrupted))
    assert lenient.code == 0 and "4 unreadable trace line(s) skipped" in lenient.stdout
    strict = pt2doctor("report", "--strict", str(corrupted))
    assert strict.code == 65 and "Traceback" not in strict.stderr


def test_how_often_each_compiled_graph_ran(run_json):
    """tlparse#46: calls per compile id, counted in the child without importing torch for it."""
    doc = run_json("call_counts.py").doc
    calls = {c["compile_id"]: c["calls"] for c in doc["compiles"]}
    assert calls == {"0/0": 7, "1/0": 3, "0/1": 1}


def test_run_record_then_minify_the_run_directory(tmp_path):
    """The README's workflow: `run --record --out DIR` then `minify DIR` (graphs/ where minify reads)."""
    run = pt2doctor("run", "--record", "--out", str(tmp_path), str(SCRIPTS / "backend_failure.py"))
    assert run.code == 1
    assert (tmp_path / "graphs" / "index.jsonl").exists()
    minified = pt2doctor("minify", "--json", str(tmp_path))
    assert minified.code == 0, minified.stderr[-2000:]
    assert json.loads(minified.stdout)["verified"] is True
    folded = json.loads((tmp_path / "session.json").read_text())["extras"]["minify"]
    assert folded["verified"] is True and folded["nodes_after"] == 1
    page = pt2doctor("report", "--html", "-o", str(tmp_path / "page.html"), str(tmp_path))
    assert page.code == 0 and 'id="extra-minify"' in (tmp_path / "page.html").read_text()


def test_a_kernel_error_reported_late_points_to_launch_blocking(tmp_path):
    """A CUDA kernel error surfaces after its graph returned (simulated on CPU): `run` says the line may
    be wrong and how to find the graph; `minify` on that run says how to record it so it can."""
    script = Path(__file__).parents[1] / "diagnose" / "scripts" / "late_kernel_error.py"
    run = pt2doctor("run", "--record", "--out", str(tmp_path), str(script))
    assert run.code == 1
    said = " ".join(run.stdout.split())
    assert "CUDA_LAUNCH_BLOCKING=1" in said and "pt2doctor diagnose" in said
    minified = pt2doctor("minify", str(tmp_path))
    assert minified.code == 3
    assert "CUDA_LAUNCH_BLOCKING=1 pt2doctor run --record" in " ".join(minified.stderr.split())


def test_compiles_before_and_after_a_dynamo_reset_are_all_kept_apart(run_json):
    """Issue #30: `torch._dynamo.reset()` restarts torch's compile ids; the second round's compiles keep
    their own entries and call counts (`@1`: after the first reset), never folded into the first round's."""
    run = run_json("dynamo_reset.py")
    assert run.code == 0, run.stderr[-2000:]
    compiles = [(c["compile_id"], c["function"], c["calls"]) for c in run.doc["compiles"]]
    assert compiles == [("0/0", "f", 3), ("1/0", "g", 2), ("0/1", "f", 1),
                        ("0/0@1", "f", 3), ("1/0@1", "g", 2), ("0/1@1", "f", 1)], compiles


def test_the_run_s_trace_read_alone_counts_each_reset_once(run_json):
    """The child marks each reset in the trace, and the second round starts at 0/0 again: the reader counts
    one reset, not two, so `report` on the trace alone names the compiles as the run did."""
    run = run_json("dynamo_reset.py")
    alone = pt2doctor("report", "--json", str(run.out_dir / "trace"))
    assert alone.code == 0, alone.stderr[-2000:]
    assert [c["compile_id"] for c in alone.doc["compiles"]] == [c["compile_id"] for c in run.doc["compiles"]]
    assert "pt2doctor_dynamo_reset" in "".join(p.read_text() for p in (run.out_dir / "trace").glob("*.log"))

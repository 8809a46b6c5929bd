"""End to end, real torch.compile: symbolic shapes survive (after Dynamo, and through Inductor
after AOT), Ctrl-C keeps the best so far, an accuracy failure is found while recording, and input
values are kept when they matter.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from graphs import INDUCTOR_DYNAMIC_SCRIPT, INDUCTOR_MARK_DYNAMIC_SCRIPT, PICKY_BACKEND

from pt2doctor.capture.recorded_run import record_script

MINIFY = [sys.executable, "-c", "from pt2doctor.cli.minify import minify_command; minify_command()"]

DYNAMIC = PICKY_BACKEND + """
    def f(x):
        x = torch.sin(x) * x.shape[0]
        x = torch.relu(x + 1)
        return torch.cos(x).sum(dim=1)

    torch.compile(f, backend=picky_backend, dynamic=True)(torch.randn(6, 5))
"""

# Fails only when relu and tanh are compiled together, so no single op reproduces it, and every
# compile sleeps: the reduction is still running when SIGINT arrives.
SLOW_PAIR = """
    import os
    import time
    import torch

    def slow_pair_backend(gm, example_inputs):
        if os.environ.get("MARK_COMPILES"):  # set for the minify run only: one line per candidate
            with open(os.environ["MARK_COMPILES"], "a") as handle:
                handle.write("compiled\\n")
        time.sleep(1.0)
        targets = {node.target for node in gm.graph.nodes}
        if torch.relu in targets and torch.tanh in targets:
            raise RuntimeError("slow_pair_backend: relu with tanh")
        return gm

    def f(x):
        for i in range(24):
            x = torch.sin(x) if i % 2 else torch.cos(x)
            if i == 6:
                x = torch.relu(x)
            if i == 18:
                x = torch.tanh(x)
        return x

    torch.compile(f, backend=slow_pair_backend)(torch.randn(4, 4))
"""


def _record(tmp_path: Path, source: str) -> Path:
    script = tmp_path / "user.py"
    script.write_text(textwrap.dedent(source))
    run_dir = tmp_path / "run"
    record_script(script, run_dir)
    return run_dir


def test_symbolic_shapes_survive_end_to_end(tmp_path):
    run_dir = _record(tmp_path, DYNAMIC)
    proc = subprocess.run([*MINIFY, str(run_dir), "--json", "--jobs", "2"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["ops"] == ["torch.relu"]
    repro = (run_dir / "repro.py").read_text()
    assert "mark_dynamic(args[0], 0)" in repro  # pytorch#114296: the repro still compiles dynamically
    ran = subprocess.run([sys.executable, "repro.py"], cwd=run_dir, capture_output=True, text=True, timeout=300)
    assert "PT2DOCTOR REPRO FAILED: NotImplementedError: picky_backend: no relu please" in ran.stderr


# Runs the repro's check with a spy on Inductor's entry (the real compile still runs), and prints
# the failure and the kinds of the tensor sizes the compile was given.
SIZES_SEEN_BY_INDUCTOR = """
import runpy
import torch
from torch._inductor import compile_fx

original, sizes = compile_fx.compile_fx_inner, []


def spy(gm, example_inputs, *args, **kwargs):
    sizes.extend(type(s).__name__ for x in example_inputs if isinstance(x, torch.Tensor) for s in x.shape)
    return original(gm, example_inputs, *args, **kwargs)


compile_fx.compile_fx_inner = spy
repro = runpy.run_path("repro.py", run_name="repro")
try:
    repro["check"]()
except Exception as e:
    print(repro["describe_failure"](e))
print(sorted(set(sizes)))
"""


@pytest.mark.slow
@pytest.mark.parametrize(("script", "marker", "sizes"), [
    (INDUCTOR_DYNAMIC_SCRIPT, "def trace_symbolic", "['SymInt']"),  # dynamic=True: every dim
    (INDUCTOR_MARK_DYNAMIC_SCRIPT, "DYNAMIC_DIMS = [(0,)]", "['SymInt', 'int']"),  # only the dim that was
], ids=["all-dims", "one-dim"])
def test_symbolic_shapes_survive_through_inductor_after_aot(recorded, minified, script, marker, sizes):
    run_dir = recorded(script)
    run, result = minified(run_dir)
    assert run.code == 0, run.stderr[-2000:]
    assert (result["stage"], result["ops"], result["verified"]) == ("aot", ["aten.relu.default"], True)
    assert marker in (run_dir / "repro.py").read_text()
    seen = subprocess.run([sys.executable, "-c", SIZES_SEEN_BY_INDUCTOR], cwd=run_dir, capture_output=True, text=True,
                          timeout=300)
    assert seen.stdout.splitlines() == ["CppCompileError: C++ compile error", sizes], seen.stderr[-2000:]


def test_ctrl_c_keeps_the_best_so_far_repro(tmp_path):
    run_dir = _record(tmp_path, SLOW_PAIR)
    marks = tmp_path / "compiles.txt"
    proc = subprocess.Popen([*MINIFY, str(run_dir), "--json", "--jobs", "2"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "MARK_COMPILES": str(marks)})
    deadline = time.monotonic() + 300
    # Past isolate_ops (4 single-op candidates) and the initial graph's run: mid-reduction.
    while not (marks.exists() and len(marks.read_text().splitlines()) >= 7) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None, "the reduction ended before Ctrl-C; make the planted graph slower"
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    out, err = proc.communicate(timeout=300)
    result = json.loads(out)
    assert result["stopped_early"] == "interrupted", err[-2000:]
    assert result["nodes_after"] <= result["nodes_before"]
    assert result["verified"], err[-2000:]  # the best so far, verified in a fresh interpreter
    assert proc.returncode == 130 and "not a minimal one" in err  # interrupted, and says what that means
    assert (run_dir / "repro.py").exists()


WRONG = """
    import torch

    def sloppy_backend(gm, example_inputs):
        if any(node.target is torch.relu for node in gm.graph.nodes):
            return lambda *args: tuple(out + 0.5 for out in gm(*args))
        return gm

    def f(x, y):
        x = torch.sin(x) * y
        x = torch.relu(x - 0.1)
        return (torch.cos(x) + y,)

    torch.compile(f, backend=sloppy_backend)(torch.randn(4, 4), torch.randn(4, 4))
"""


def test_accuracy_failure_found_while_recording(tmp_path):
    script = tmp_path / "user.py"
    script.write_text(textwrap.dedent(WRONG))
    run_dir = tmp_path / "run"
    record_script(script, run_dir, accuracy_tolerance=1e-4)
    failures = [json.loads(line) for line in (run_dir / "graphs" / "failures.jsonl").read_text().splitlines()]
    assert [f["phase"] for f in failures] == ["accuracy"]
    proc = subprocess.run([*MINIFY, str(run_dir), "--json", "--jobs", "2"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]  # no --accuracy needed: the recording says so
    result = json.loads(proc.stdout)
    assert result["signature"]["kind"] == "accuracy"
    assert result["ops"] == ["torch.relu"]


def test_no_accuracy_failure_recorded_when_results_match(tmp_path):
    script = tmp_path / "user.py"
    script.write_text(textwrap.dedent(WRONG.replace("out + 0.5", "out")))
    record_script(script, tmp_path / "run", accuracy_tolerance=1e-4)
    assert (tmp_path / "run" / "graphs" / "failures.jsonl").read_text() == ""


INDUCTOR_ACCURACY = """
    import torch
    import torch._inductor.config
    torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"

    def f(x):
        for i in range(12):
            x = torch.relu(x) if i == 6 else (torch.sin(x) if i % 2 else x * 1.01)
        return x

    with torch.no_grad():
        torch.compile(f)(torch.randn(8, 8))
"""


@pytest.mark.slow
def test_inductor_accuracy_bug_found_while_recording_ends_at_aten_relu(tmp_path):
    script = tmp_path / "user.py"
    script.write_text(textwrap.dedent(INDUCTOR_ACCURACY))
    run_dir = tmp_path / "run"
    record_script(script, run_dir, accuracy_tolerance=1e-4)
    proc = subprocess.run([*MINIFY, str(run_dir), "--json", "--jobs", "2"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert (result["stage"], result["signature"]["kind"], result["ops"]) == ("aot", "accuracy", ["aten.relu.default"])


VALUE_BACKEND = '''
import torch


def picky_values(gm, example_inputs):
    def run(*args):
        if any(isinstance(a, torch.Tensor) and not a.is_floating_point() and bool((a == 3).any()) for a in args):
            raise ValueError("picky_values: index 3")
        return gm(*args)
    return run
'''


def test_saved_input_values_when_they_matter(tmp_path):
    import torch

    from pt2doctor.model.minify import BackendKind, BackendSpec, Stage
    from pt2doctor.reduce.api import minify
    from pt2doctor.reduce.oracle import ReproContext

    def f(x, idx):
        y = torch.sin(x) * 2
        return (torch.cos(y[idx]) + 1,)

    gm = torch.fx.symbolic_trace(f)
    context = ReproContext(Stage.DYNAMO, BackendSpec(BackendKind.SOURCE, "picky_values", VALUE_BACKEND))
    # Random (zero) indices would not fail: only the saved index values reproduce it.
    outcome = minify(gm, [torch.randn(5, 4), torch.tensor([3, 1, 0])], context, out_dir=tmp_path, jobs=2)
    assert outcome.result.verified
    assert outcome.result.signature.text == "ValueError: picky_values: index N"
    assert "saved_input('arg1', 'cpu')" in outcome.repro_text
    assert torch.equal(torch.load(tmp_path / "repro_inputs.pt", weights_only=True)["arg1"], torch.tensor([3, 1, 0]))
    assert outcome.result.nodes_after < outcome.result.nodes_before

"""Crashes that kill the process: the graph to blame is found and its repro dies the same way.

- A Dynamo graph of `torch.func.jvp` calls functorch's scaffolding (`_jvp_increment_nesting`,
  `_make_dual`, ...): plain functions that reject a tracing Proxy, and calls made for their effect
  alone. They are nodes of the loaded graph and of every case, so the graph loads and its repro
  runs as the program did (pytorch#197086 segfaults in it with backend="aot_eager").
- A kernel that writes past a buffer's end kills the process at a later `free`, after the graph
  returned (pytorch#196681), sometimes after the script's own check raised: the run ends with the
  signal (its category too), and the graph that ran last is the one to minify.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from clihelp import pt2doctor

from pt2doctor.capture.recorded_run import record_script
from pt2doctor.model.minify import Stage, TensorSpec
from pt2doctor.model.signature import from_exit
from pt2doctor.reduce.fx_load import NothingToMinify, load_failing
from pt2doctor.reduce.oracle import script_for
from pt2doctor.reduce.repro import ReproScript, render

REALBUGS = Path(__file__).parents[1] / "realbugs"

# a backend that returns the graph's own forward: the process aborts after the graph ran, not in it,
# and after the script raised (glibc finding a corrupted heap at the interpreter's teardown)
ABORT_AFTER_THE_GRAPH = """
    import atexit, os
    import torch

    atexit.register(os.abort)
    out = torch.compile(lambda x: torch.sin(x) + 1, backend="eager")(torch.randn(4))
    raise AssertionError("Tensor-likes are not close!")
"""


def test_a_jvp_graph_loads_with_functorch_scaffolding_and_its_repro_dies_the_same_way(tmp_path):
    run_dir = tmp_path / "run"
    code = record_script(REALBUGS / "jvp_ldexp_aot_eager_segfault.py", run_dir)
    assert code == -signal.SIGSEGV
    recorded = load_failing(run_dir, out_dir=tmp_path)  # in flight: g0000 run; was: TypeError, Proxy(getitem)
    ops = recorded.case.ops
    # functorch's scaffolding (torch._functorch.predispatch on 2.13, torch._C._functorch on 2.11)
    assert "torch.ldexp" in ops and any(op.endswith("._jvp_increment_nesting") for op in ops)
    assert any(op.endswith("._exit_dual_level") for op in ops)  # used by nothing: kept for its effect
    (tmp_path / "repro.py").write_text(render(script_for(recorded.case, recorded.context)))
    proc = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert from_exit(proc.returncode, proc.stdout + proc.stderr).text == "SIGSEGV", proc.stderr[-2000:]


@pytest.mark.slow
def test_an_after_aot_graph_given_a_zero_tensor_is_compiled_for_a_plain_one(tmp_path):
    """pytorch#197067: Inductor's kernel reads a ZeroTensor input's (absent) data and segfaults. AOTAutograd hands
    Inductor plain fakes to compile for; compiling for the ZeroTensor itself failed in Inductor's debug copy of the
    graph ("ZeroTensor is not serializable"), a failure of the harness alone, which every graph on that input
    showed: the minifier cut it down to a `select` that never reaches a kernel."""
    select = "    select = torch.ops.aten.select.int(arg0_1, 0, -1)\n"
    graphs = {"view": f"{select}    return (select,)\n",
              "kernel": f"{select}    add = torch.ops.aten.add.Tensor(select, 10)\n    return (add,)\n"}
    codes = {}
    for name, body in graphs.items():
        script = ReproScript(Stage.AOT, "def forward(self, arg0_1):\n" + body, (TensorSpec((3,), (1,), zero=True),))
        (tmp_path / f"{name}.py").write_text(render(script))
        proc = subprocess.run([sys.executable, f"{name}.py"], cwd=tmp_path, capture_output=True, text=True,
                              timeout=600)
        codes[name] = from_exit(proc.returncode, proc.stdout + proc.stderr).text if proc.returncode else "passed"
    assert codes == {"view": "passed", "kernel": "SIGSEGV"}


def test_a_process_that_dies_after_the_graph_ran_blames_that_graph(tmp_path):
    script = tmp_path / "user.py"
    script.write_text(textwrap.dedent(ABORT_AFTER_THE_GRAPH))
    assert record_script(script, tmp_path / "run") == -signal.SIGABRT
    assert (tmp_path / "run" / "graphs" / "inflight").read_text().strip() == "g0000 ran"
    assert load_failing(tmp_path / "run", died_of_signal=True).graph_id == "g0000"
    with pytest.raises(NothingToMinify):  # without the signal death, a graph that returned is not blamed
        load_failing(tmp_path / "run")


def test_minify_of_a_recorded_run_knows_it_died_of_a_signal(tmp_path):
    script = tmp_path / "user.py"
    script.write_text(textwrap.dedent(ABORT_AFTER_THE_GRAPH))
    assert pt2doctor("run", "--record", "--out", "run", str(script), cwd=tmp_path).code == 128 + signal.SIGABRT
    minify = pt2doctor("minify", "run", cwd=tmp_path)
    # the graph that ran last is blamed (its session says SIGABRT), then found not to fail alone (it did not
    # abort: the script's exit did); was "no graph failed in this run", the signal unknown without --script
    assert minify.code == 3 and "does not fail in isolation" in minify.stderr, minify.stderr


def test_a_run_that_raised_and_then_died_of_a_signal_ends_with_the_signal(tmp_path):
    from pt2doctor.analysis.failures import classify_failures, signature
    from pt2doctor.analysis.verdict import verdict_for
    from pt2doctor.capture.runner import RunOptions, run_script
    from pt2doctor.model import Category

    script = tmp_path / "user.py"
    script.write_text(textwrap.dedent(ABORT_AFTER_THE_GRAPH))
    session = classify_failures(run_script(RunOptions(script, (), tmp_path / "run", timeout_s=300, echo=False)))
    assert signature(session) == "SIGABRT"
    assert [f.exception for f in session.failures][:2] == ["SIGABRT", "AssertionError"]  # the symptom is kept
    assert verdict_for(session).category is Category.RUNTIME_CRASH  # was: from the AssertionError


# A backend whose compiled code aborts the process on the values it is given (an index past the end, as a
# kernel's device-side assert would): random stand-ins never abort, so only the real inputs reproduce it.
ABORT_ON_ITS_INPUTS = """
    import os
    import torch

    def checking_backend(gm, example_inputs):
        def run(*args):
            if int(args[1].max()) >= args[0].shape[0]:
                os.abort()
            return gm.forward(*args)
        return run

    table = torch.randn(8)
    index = torch.tensor([1, 3, 7, 8])  # one past the end
    print(torch.compile(lambda t, i: t.sin()[i.clamp(max=7)] * 2, backend=checking_backend)(table, index))
"""


def test_a_graph_that_kills_the_process_keeps_the_inputs_of_its_first_call(tmp_path):
    """Issue 30: the inputs were written only when a failure could be recorded, after the graph ran, and a
    failed save removed the file kept earlier (FileNotFoundError in the minifier). Saved before the first
    call, they are the values the repro needs to die the same way."""
    script = tmp_path / "user.py"
    script.write_text(textwrap.dedent(ABORT_ON_ITS_INPUTS))
    assert record_script(script, tmp_path / "run") == -signal.SIGABRT
    graphs = tmp_path / "run" / "graphs"
    assert (graphs / "g0000.call.inputs.pt").is_file() and not list(graphs.glob("*.part"))
    recorded = load_failing(tmp_path / "run", out_dir=tmp_path)
    (tmp_path / "repro.py").write_text(render(script_for(recorded.case, recorded.context)))
    proc = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert from_exit(proc.returncode, proc.stdout + proc.stderr).text == "SIGABRT", proc.stderr[-2000:]


def test_a_save_that_fails_removes_nothing_kept_before(tmp_path, monkeypatch):
    import torch

    from pt2doctor.capture.input_values import load_values, save_values

    kept = tmp_path / "g0000.inputs.pt"
    assert save_values([torch.tensor([1, 2])], kept, budget=1 << 20) == {0: "arg0"}

    def dies_half_way(obj, path):  # as torch.save on a tensor of a CUDA context a device-side assert poisoned
        Path(path).write_bytes(b"half")
        raise RuntimeError("CUDA error: device-side assert triggered")

    monkeypatch.setattr(torch, "save", dies_half_way)
    assert save_values([torch.tensor([5, 6])], kept, budget=1 << 20) == {}
    monkeypatch.undo()
    assert load_values(kept)[0].tolist() == [1, 2] and not list(tmp_path.glob("*.part"))

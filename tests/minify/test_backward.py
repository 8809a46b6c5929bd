"""Backward graphs: recorded when AOTAutograd compiles them (lazily, at `loss.backward()`), their
failures tied to them, minified with the backend's own backward compiler, and a repro that runs the
backward graph alone. A custom `aot_autograd` backend's crash (fast) and real Inductor bugs (slow)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pt2doctor.capture.input_values import load_values
from pt2doctor.capture.recorded_run import record_script
from pt2doctor.model.minify import BackendKind, BackendSpec, Stage, TensorSpec
from pt2doctor.model.recording import read_failures, read_index
from pt2doctor.model.signature import FAILURE_MARKER
from pt2doctor.reduce.repro import ReproScript, render

REALBUGS = Path(__file__).parents[1] / "realbugs"

# The forward compiles fine; the backward compiler refuses one op, at `loss.backward()`.
BW_COMPILER_FAILS = """
    import torch
    from torch._dynamo.backends.common import aot_autograd

    def fw(gm, example_inputs):
        return gm.forward

    def bw(gm, example_inputs):
        for node in gm.graph.nodes:
            if node.target is torch.ops.aten.sigmoid_backward.default:
                raise NotImplementedError("bw: no sigmoid_backward please")
        return gm.forward

    backend = aot_autograd(fw_compiler=fw, bw_compiler=bw)

    def f(x, w):
        y = torch.sigmoid(x @ w)
        return (y * 2 + x.sum()).relu().sum()

    x = torch.randn(4, 4, requires_grad=True)
    w = torch.randn(4, 4, requires_grad=True)
    loss = torch.compile(f, backend=backend)(x, w)
    loss.backward()
"""


@pytest.fixture(scope="module")
def bw_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    script = tmp_path_factory.mktemp("bw") / "train.py"
    script.write_text(textwrap.dedent(BW_COMPILER_FAILS))
    return script


@pytest.fixture(scope="module")
def bw_recording(bw_script: Path) -> Path:
    run_dir = bw_script.parent / "run"
    assert record_script(bw_script, run_dir) == 1
    return run_dir


def test_a_backward_compile_failure_is_tied_to_the_backward_graph(bw_recording):
    index = {e.id: e for e in read_index(bw_recording / "graphs")}
    [failure] = read_failures(bw_recording / "graphs")
    graph = index[failure.graph]
    assert (failure.phase, failure.description) == ("compile", "NotImplementedError: bw: no sigmoid_backward please")
    assert (graph.stage, graph.aot_kind) == (Stage.AOT, "backward")
    parent = index[graph.parent]  # the Dynamo graph whose forward it differentiates, same compile
    assert parent.stage is Stage.DYNAMO and parent.compile_id == graph.compile_id == "0/0"
    assert graph.backend == parent.backend and graph.backend.kind is BackendKind.SOURCE
    assert "sigmoid_backward" in (bw_recording / "graphs" / f"{graph.id}.py").read_text()


def test_the_backward_graph_is_minified_with_the_backends_bw_compiler(bw_recording):
    proc = subprocess.run([sys.executable, "-m", "pt2doctor", "minify", str(bw_recording), "--json", "--jobs", "2"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    repro = bw_recording / "repro.py"
    assert "aten.sigmoid_backward.default" in repro.read_text() and "bw_compiler" in repro.read_text()
    run = subprocess.run([sys.executable, repro.name], cwd=repro.parent, capture_output=True, text=True)
    assert run.returncode == 1
    assert f"{FAILURE_MARKER}NotImplementedError: bw: no sigmoid_backward please" in run.stderr


def test_inductors_backward_repro_compiles_it_as_a_backward_graph():
    code = "def forward(self, x):\n    return (torch.ops.aten.relu.default(x),)\n"
    script = ReproScript(Stage.AOT, code, (TensorSpec((4,), (1,)),), backward=True)
    assert "compile_fx_inner(gm, list(args), is_backward=True)" in render(script)
    forward = render(ReproScript(Stage.AOT, code, (TensorSpec((4,), (1,)),)))
    assert "compile_fx_inner(gm, list(args))" in forward and "is_backward" not in forward
    custom = render(ReproScript(Stage.AOT, code, (TensorSpec((4,), (1,)),), BackendSpec(BackendKind.NAMED, "aot_eager"),
                                backward=True))
    assert "BACKEND = 'aot_eager'" in custom and 'kwargs.get("bw_compiler")' in custom


@pytest.mark.slow
def test_diagnose_names_the_backward_graph_and_blames_the_backend(diagnosed, bw_script):
    run, d = diagnosed(bw_script)
    assert (d["category"], d["stage"]) == ("backend_failure", "backend"), d["notes"]
    assert d["repro_verified"] and d["culprit_ops"] == ["aten.sigmoid_backward.default"], d["notes"]


@pytest.mark.slow
def test_a_wrong_gradient_is_minified_from_the_backward_graph(diagnosed):
    # pytorch#185509: Inductor's backward of interpolate/conv/max_pool/where computes wrong gradients
    run, d = diagnosed(REALBUGS / "interpolate_conv_pool_where_grads.py")
    assert (d["category"], d["stage"]) == ("accuracy", "inductor")
    assert d["repro_verified"], d["notes"]
    # in PyTorch's idiom: the forward in torch calls whose backward shows it (its Dynamo graph, smaller than the
    # backward graph, judged with its gradients), the harness kept beside it
    repro = (run.out_dir / "repro.py").read_text()
    assert "def grads(f, *args):" in repro and "interpolate" in repro and "aten." not in repro, d["notes"]
    assert d["short"]["lines"] <= 40 and d["short"]["test"], d["notes"]
    assert any(n.startswith("minified the Dynamo graph") and "with its backward" in n for n in d["notes"])
    assert "reference_runs(mod, args, fp64=False, grads=GRADS)" in (run.out_dir / "repro_graph.py").read_text()


@pytest.mark.slow
def test_a_wrong_saved_activation_is_minified_from_the_forward_graph(diagnosed):
    # pytorch#185517: the bf16 forward keeps a mask for the backward that differs from eager's; the loss
    # is the same, so only the forward's saved outputs show it
    run, d = diagnosed(REALBUGS / "margin_ranking_loss_bf16_backward.py")
    assert (d["category"], d["stage"]) == ("accuracy", "inductor")
    assert d["repro_verified"], d["notes"]
    assert "is_backward" not in (run.out_dir / "repro.py").read_text()


def test_a_boxed_backward_call_is_judged_and_kept_on_the_inputs_it_was_given(tmp_path):
    # AOTAutograd calls a boxed compiled backward with a list the callee empties (it steals the saved
    # activations): the judge and the kept values must read the inputs before the call
    import torch

    from pt2doctor.capture.child import graph_recorder, graph_runs

    def eager(x, g):
        return (x * g,)

    def wrong(args):
        x, g = args
        args.clear()
        return (x * g + 1,)

    wrong._boxed_call = True
    recorder = graph_recorder.GraphRecorder(tmp_path)
    checked = graph_runs.aot_checked(recorder, "g0002", "0/0", wrong, torch.fx.symbolic_trace(eager), 1e-4)
    x, g = torch.randn(3), torch.randn(3)
    assert checked._boxed_call and torch.equal(checked([x, g])[0], x * g + 1)
    recorder.close()
    [failure] = read_failures(tmp_path / "graphs")
    assert (failure.graph, failure.phase, failure.values) == ("g0002", "accuracy", "g0002.failed.inputs.pt")
    kept = load_values(tmp_path / "graphs" / "g0002.failed.inputs.pt")
    assert torch.equal(kept[0], x) and torch.equal(kept[1], g)


@pytest.mark.slow  # two C++ compiles (20-80 s on 2 cores)
def test_after_aot_a_compile_failure_is_the_failure_whatever_eager_does(tmp_path):
    """pytorch#145208 on CUDA: a flex_attention backward graph's eager run fails (its reference implementation has
    the bug too) and Inductor fails lowering it; the repro rejected it as invalid ("eager run fails") and the graph
    was not minified. Here eager fails an assertion and Inductor's C++ compile fails (injected): the repro shows the
    compile failure; a graph that compiles and whose eager run fails stays invalid."""
    code = ("def forward(self, x):\n"
            "    torch.ops.aten._assert_async.msg(torch.ops.aten.gt.Scalar(torch.ops.aten.sum.default(x), 1e9), "
            "'eager fails')\n"
            "    return (torch.ops.aten.relu.default(x),)\n")
    inject = "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'compile_error'"
    for name, lines, expected in (("compile_fails.py", (inject,), "CppCompileError"),
                                  ("compiles.py", (), "InvalidRepro: eager run fails: RuntimeError")):
        repro = tmp_path / name
        repro.write_text(render(ReproScript(Stage.AOT, code, (TensorSpec((4,), (1,)),), config_lines=lines)))
        run = subprocess.run([sys.executable, repro.name], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        said = next(line for line in run.stderr.splitlines() if line.startswith(FAILURE_MARKER))
        assert run.returncode == 1 and expected in said, run.stderr[-2000:]


def test_a_backward_graphs_stage_is_found_on_it_by_the_backend_alone(bw_recording, tmp_path):
    """No Dynamo graph of its own: its backend's compile of it (the top rung) is asked alone, in a warm worker, and
    fails as the program did: the backend's stage, the lower rungs not run (not by three runs of the program)."""
    from pt2doctor.diagnose.graph_stages import climb_on_graph
    from pt2doctor.diagnose.recording import Recording
    from pt2doctor.processes.pool import WorkerPool

    with WorkerPool(1, 120.0) as pool:
        ladder = climb_on_graph(pool, Recording(bw_recording, True), "backend", tmp_path)
    assert ladder.conclusive and ladder.after_aot, ladder.why
    assert (ladder.outcomes, ladder.queries) == ({"backend": "fail"}, 1)


# An aot_autograd backend whose forward is right and whose backward adds one to every gradient.
WRONG_BACKWARD = BackendSpec(BackendKind.SOURCE, "wrong_backward", textwrap.dedent('''\
    from torch._dynamo.backends.common import aot_autograd


    def _off_by_one(gm, example_inputs):
        def run(*args):
            return [o + 1 if isinstance(o, torch.Tensor) else o for o in gm(*args)]
        return run


    wrong_backward = aot_autograd(fw_compiler=lambda gm, example_inputs: gm, bw_compiler=_off_by_one)
    '''))


@pytest.mark.parametrize("grads", [False, True])
def test_a_dynamo_graph_judged_with_its_backward_shows_a_wrong_gradient(tmp_path, grads):
    """A forward graph whose backward is compiled wrong passes judged on its outputs and fails judged with its
    gradients too, both as the harness form and in PyTorch's idiom (`grads(f, *args)`)."""
    from pt2doctor.reduce.short_repro import render_short

    script = ReproScript(Stage.DYNAMO, "def forward(self, x, w):\n    return ((x * w).sin(),)\n",
                         (TensorSpec((4,), (1,), requires_grad=True), TensorSpec((4,), (1,))), WRONG_BACKWARD,
                         accuracy=True, grads=grads)
    short = render_short(script)
    assert short is not None and "backend=wrong_backward" in short  # the script's backend, as it defines it
    (tmp_path / "repro.py").write_text(render(script))
    (tmp_path / "short.py").write_text(short)
    run = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == (1 if grads else 0), run.stderr[-2000:]
    if grads:
        assert f"{FAILURE_MARKER}AccuracyMismatch" in run.stderr
    run = subprocess.run([sys.executable, "short.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == (1 if grads else 0), run.stderr[-2000:]


def test_the_short_form_judged_with_its_backward_compares_the_gradients(tmp_path):
    from pt2doctor.reduce.short_repro import inductor_alone, render_short

    script = ReproScript(Stage.DYNAMO, "def forward(self, x, w):\n    return ((x * w).sin(),)\n",
                         (TensorSpec((4,), (1,), requires_grad=True), TensorSpec((4,), (1,))),
                         BackendSpec(BackendKind.NAMED, "aot_eager"), accuracy=True, grads=True)
    short = render_short(script)
    assert short is not None and "def grads(f, *args):" in short
    assert "expected = grads(fn, *[a.clone() if isinstance(a, torch.Tensor) else a for a in args])" in short
    assert "actual = grads(torch.compile(fn, backend='aot_eager', fullgraph=True), *args)" in short
    inductors = short.replace("backend='aot_eager'", "backend='inductor'")
    assert inductor_alone(inductors) is None  # a graph Inductor compiles alone has no backward
    (tmp_path / "repro.py").write_text(short)
    run = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]  # aot_eager computes the same gradients

"""End to end, real recorder and minifier: graphs with higher-order ops (torch.cond, an
autograd.Function) load from their recorded code and reduce to the op alone, branches included;
a graph that became dynamic after a recompile (an int turned SymInt) fails in its repro as it did;
an after-AOT graph calling Inductor's random prims (dropout) loads and renders.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pt2doctor.capture.recorded_run import record_script
from pt2doctor.model.minify import Stage, TensorSpec
from pt2doctor.reduce.fx_load import load_failing
from pt2doctor.reduce.repro import ReproScript, render

COND = """
    import torch

    def no_cond_backend(gm, example_inputs):
        if any(n.target is torch.ops.higher_order.cond for n in gm.graph.nodes):
            raise RuntimeError("no_cond_backend: torch.cond unsupported")
        return gm.forward

    def f(x):
        y = torch.sin(x) * 2
        return torch.cond(y.sum() > 0, lambda t: t.sin(), lambda t: t.cos(), (y,)) + 1

    torch.compile(f, backend=no_cond_backend)(torch.randn(4))
"""

# An autograd.Function in a module that mutates a buffer: the backend rejects a sigmoid inside
# any graph submodule, so the failure lives in the op's forward branch.
AUTOGRAD_FUNCTION = """
    import torch

    class Gate(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x.sigmoid()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x

    def no_sigmoid_backend(gm, example_inputs):
        subs = [m for m in gm.modules() if isinstance(m, torch.fx.GraphModule) and m is not gm]
        if any("sigmoid" in str(n.target) for m in subs for n in m.graph.nodes):
            raise RuntimeError("no_sigmoid_backend: sigmoid in a submodule")
        return gm.forward

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", torch.zeros(()))
            self.lin = torch.nn.Linear(3, 3)

        def forward(self, x):
            self.count += 1
            return Gate.apply(self.lin(x)).sum() + self.count

    torch.compile(M(), backend=no_sigmoid_backend)(torch.randn(2, 3)).backward()
"""

# The third call recompiles with x's dim 0 and k dynamic: only then are two inputs SymInts.
DYNAMIC_INT = """
    import torch

    def scalar_backend(gm, example_inputs):
        kinds = [type(a).__name__ for a in example_inputs]
        if kinds.count("SymInt") >= 2 and kinds[0] == "SymInt":
            raise RuntimeError(f"scalar_backend: symbolic scalars {kinds}")
        return gm.forward

    def step(x, lr, k):
        return ((x - lr * x) * k).clamp(min=0).sum()

    cstep = torch.compile(step, backend=scalar_backend)
    x = torch.randn(4, 3)
    cstep(x, 0.1, 2)
    cstep(x, 0.1, 3)
    cstep(torch.randn(5, 3), 0.1, 4)
"""

DROPOUT_INDUCTOR = """
    import torch
    import torch._inductor.config as cfg

    cfg.cpp.inject_relu_bug_TESTING_ONLY = "runtime_error"

    def f(x):
        return torch.relu(torch.nn.functional.dropout(x, 0.5, training=True) + 1)

    torch.compile(f)(torch.randn(8))
"""


# flex_attention on CPU: Dynamo's graph builds the block mask under vmap with an item assignment
# (`dense_mask[idx] = ones`), which tracing the recorded code met as a Proxy without __setitem__ (issue 39, point 5).
FLEX_ATTENTION = """
    import torch
    from torch.nn.attention.flex_attention import flex_attention

    def no_flex_backend(gm, example_inputs):
        if any("flex_attention" in str(n.target) for n in gm.graph.nodes):
            raise NotImplementedError("no_flex_backend: flex_attention unsupported")
        return gm.forward

    def f(q, k, v):
        return torch.cos(flex_attention(q, k, v, score_mod=lambda s, b, h, m, n: s * 0.5)) + 1

    q, k, v = (torch.randn(1, 2, 16, 8) for _ in range(3))
    torch.compile(f, backend=no_flex_backend)(q, k, v)
"""


def _record(tmp_path: Path, source: str) -> Path:
    script = tmp_path / "user.py"
    script.write_text(textwrap.dedent(source))
    record_script(script, tmp_path / "run")
    return tmp_path / "run"


def _minify(run_dir: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", "from pt2doctor.cli.minify import minify_command; minify_command()",
         str(run_dir), "--json", "--jobs", "2"], capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_cond_is_recorded_as_code_and_reduced_to_the_cond_alone(tmp_path):
    run_dir = _record(tmp_path, COND)
    graphs = run_dir / "graphs"
    entry = json.loads((graphs / "index.jsonl").read_text().splitlines()[0])
    assert sorted(entry["submodules"]) == ["cond_false_0", "cond_true_0"]
    assert entry["constants"] is None  # the branches are code, not pickled modules
    result = _minify(run_dir)
    assert (result["ops"], result["verified"]) == (["higher_order.cond", "_operator.getitem"], True)
    repro = (run_dir / "repro.py").read_text()
    assert "class CondTrue0(torch.nn.Module):" in repro and "pt2doctor" not in repro.split('"""')[2]


@pytest.mark.slow  # 25 s: flex attention's score and mask bodies; higher-order ops end to end are in the cond tests
def test_flex_attention_with_its_block_mask_reduces_to_the_op_and_replays(tmp_path):
    run_dir = _record(tmp_path, FLEX_ATTENTION)
    result = _minify(run_dir)
    assert result["verified"] and "higher_order.flex_attention" in result["ops"], result
    assert result["nodes_after"] < result["nodes_before"]
    ran = subprocess.run([sys.executable, str(run_dir / "repro.py")], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 1 and "no_flex_backend: flex_attention unsupported" in ran.stderr


def test_autograd_function_reduces_to_its_apply_with_both_bodies(tmp_path):
    run_dir = _record(tmp_path, AUTOGRAD_FUNCTION)
    result = _minify(run_dir)
    assert (result["ops"], result["verified"]) == (["higher_order.autograd_function_apply", "_operator.getitem"], True)
    repro = (run_dir / "repro.py").read_text()
    assert "class FwdBody0(torch.nn.Module):" in repro and "class BwdBody0(torch.nn.Module):" in repro


def test_an_int_that_became_a_symint_stays_symbolic_in_the_repro(tmp_path):
    run_dir = _record(tmp_path, DYNAMIC_INT)
    result = _minify(run_dir)
    assert result["verified"] is True
    repro = (run_dir / "repro.py").read_text()
    assert "DYNAMIC_SOURCES = \"L['l_k_']\"" in repro  # only k: lr stays a constant


@pytest.mark.slow
def test_after_aot_graph_with_inductor_random_prims_loads_and_minifies(tmp_path):
    run_dir = _record(tmp_path, DROPOUT_INDUCTOR)  # record_script records every after-AOT graph
    assert "torch.ops.prims.inductor_seeds" in (run_dir / "graphs" / "g0001.py").read_text()
    assert load_failing(run_dir).context.stage.value == "aot"  # the prims resolve
    result = _minify(run_dir)
    assert (result["stage"], result["ops"], result["verified"]) == ("aot", ["aten.relu.default"], True)


def test_a_repro_calling_inductor_random_prims_imports_what_registers_them():
    code = """def forward(self, x):
    seeds = torch.ops.prims.inductor_seeds.default(1, device(type='cpu'))
    return (x,)
"""
    spec = TensorSpec((2,), (1,), "float32", "cpu")
    text = render(ReproScript(Stage.AOT, code, (spec,)))
    assert "import torch._inductor.inductor_prims" in text
    assert "inductor_prims" not in render(ReproScript(Stage.AOT, "def forward(self, x):\n    return (x,)\n", (spec,)))

"""Failing graphs for the end-to-end minifier tests and the benchmark."""

from __future__ import annotations

import torch
import torch.fx

from pt2doctor.model.minify import TensorSpec


def torch_chain(n: int, relu_at: int | None = None) -> torch.fx.GraphModule:
    """A torch-level elementwise chain of `n` ops with one `torch.relu` (what Dynamo hands a backend)."""
    relu_at = n // 2 if relu_at is None else relu_at

    def f(x):
        for i in range(n):
            x = torch.relu(x) if i == relu_at else (torch.sin(x) if i % 2 else x * 1.01)
        return (x,)

    return torch.fx.symbolic_trace(f)


def aten_chain(n: int, relu_at: int | None = None) -> torch.fx.GraphModule:
    """The same chain at aten level (what AOTAutograd hands Inductor)."""
    relu_at = n // 2 if relu_at is None else relu_at
    aten = torch.ops.aten

    def f(x):
        for i in range(n):
            x = aten.relu.default(x) if i == relu_at else (aten.sin.default(x) if i % 2 else aten.mul.Tensor(x, 1.01))
        return (x,)

    return torch.fx.symbolic_trace(f)


CHAIN_INPUTS = [TensorSpec((16, 16), (16, 1))]


# A user script compiled with dynamic shapes whose Inductor compile fails on the relu (after AOT),
# with an index input whose values the recorder keeps. Recorded once a session (`recorded`).
# A user script's own backend that refuses one op (the head of a script, indented to be dedented).
PICKY_BACKEND = """
    import torch

    def picky_backend(gm, example_inputs):
        for node in gm.graph.nodes:
            if node.target is torch.relu:
                raise NotImplementedError("picky_backend: no relu please")
        return gm
"""

INDUCTOR_DYNAMIC_SCRIPT = """
    import torch
    import torch._inductor.config
    torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "compile_error"


    def f(x, idx):
        for i in range(6):
            x = torch.relu(x) if i == 3 else (torch.sin(x) if i % 2 else x * x.shape[0])
        return x[idx].sum(dim=1)


    with torch.no_grad():
        torch.compile(f, dynamic=True)(torch.randn(6, 5), torch.tensor([4, 1, 3]))
"""

# As INDUCTOR_DYNAMIC_SCRIPT, but only dim 0 of `x` is dynamic (mark_dynamic): dim 1 stays static.
INDUCTOR_MARK_DYNAMIC_SCRIPT = INDUCTOR_DYNAMIC_SCRIPT.replace(
    "torch.compile(f, dynamic=True)(torch.randn(6, 5), torch.tensor([4, 1, 3]))",
    "x = torch.randn(6, 5)\n        torch._dynamo.mark_dynamic(x, 0)\n"
    "        torch.compile(f)(x, torch.tensor([4, 1, 3]))",
)

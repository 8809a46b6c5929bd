"""
issue: https://github.com/pytorch/pytorch/issues/174013
title: [export] While HOP export error
kind: crash
category: backend_failure
stage: aot_autograd
culprit: torch.ops.higher_order.while_loop whose cond_fn reads a module buffer, retraced by run_decompositions
fails_on: torch 2.13.0+cpu: export passes; run_decompositions raises RuntimeError: Attempting to use FunctionalTensor on its own
"""

# The issue hit this through torch.onnx.export, which calls ep.run_decompositions(decomp_table).
import torch
from torch.export import export

class SimpleWithLinear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(2, 2)
        self.dec = torch.nn.Buffer(torch.tensor(1))

    def forward(self, iter, x):
        def cond_fn(it, x):
            return it - self.dec > 0

        def body_fn(it, x):
            return it - 1, self.linear(x)

        return torch.ops.higher_order.while_loop(cond_fn, body_fn, [iter, x], [])

ep = export(SimpleWithLinear(), (torch.tensor(3), torch.tensor([[1.0, 2.0], [3.0, 4.0]])))
print("export ok")
ep.run_decompositions()
print("run_decompositions ok")

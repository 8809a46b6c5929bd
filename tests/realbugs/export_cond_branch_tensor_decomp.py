"""
issue: https://github.com/pytorch/pytorch/issues/180354
title: `torch.cond` with tensors created in `[true/false]_fn` fails during `run_decompositions`
kind: crash
category: backend_failure
stage: aot_autograd
culprit: torch.cond whose branch creates a tensor with torch.tensor (aten.lift_fresh_copy inside the branch)
fails_on: torch 2.13.0+cpu: run_decompositions raises RuntimeError: Attempting to use FunctionalTensor on its own
"""

import torch


def branch(x):
    torch.tensor(0)  # the export and run_decompositions pass without this line
    return x.clone()


class Module(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.any(), branch, branch, (x,))


ep = torch.export.export(Module(), (torch.empty(()),))
ep.run_decompositions()

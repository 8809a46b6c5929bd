"""
issue: https://github.com/pytorch/pytorch/issues/196467
title: [dynamo] torch.Tensor(t.size()) is traced as torch.Tensor(tuple), silently changing shape semantics under torch.compile
kind: wrong_result
category: accuracy
stage: dynamo
culprit: the legacy torch.Tensor(torch.Size) constructor: Dynamo bakes the torch.Size into the graph as a plain tuple (data instead of shape)
fails_on: torch 2.13.0+cpu: compiled result has shape torch.Size([2]), eager torch.Size([1, 4])
"""

import torch

def f(x):
    v = torch.nn.functional.linear(x, torch.ones(4, 10), torch.zeros(4))  # (1, 4)
    return torch.Tensor(v.size())

x = torch.randn(1, 10)
eager = f(x).shape
compiled = torch.compile(f, fullgraph=True)(x).shape
print(eager)                                        # torch.Size([1, 4])
print(compiled)                                     # torch.Size([2])   <-- wrong
assert eager == compiled

"""
issue: https://github.com/pytorch/pytorch/issues/184893
title: [Inductor] argmin/min returns incorrect indices for boolean tensors
kind: wrong_result
category: accuracy
stage: inductor
culprit: aten.min.dim
fails_on: torch 2.13.0+cpu: min(0).indices of a (2, 32) bool tensor differ from eager
"""

import torch
torch.manual_seed(0)
def fnmin(x):
    return x.min(0)
for n in range(1, 8):
    t1 = torch.randint(2, size=(n, 32), dtype=torch.bool)
    e = fnmin(t1); c = torch.compile(fnmin)(t1)
    assert e.indices.tolist() == c.indices.tolist(), n

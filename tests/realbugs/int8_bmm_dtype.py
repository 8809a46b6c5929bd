"""
issue: https://github.com/pytorch/pytorch/issues/191308
title: [Inductor][CPU] torch.compile changes int8 batched matmul output dtype to int64
kind: wrong_result
category: accuracy
stage: inductor
culprit: aten.bmm
fails_on: torch 2.13.0+cpu: int8 matmul result comes back as int64
"""

import torch
def model(a, b):
    return torch.matmul(a, b)
a = torch.ones((1, 1, 2), dtype=torch.int8)
b = torch.ones((1, 2, 2), dtype=torch.int8)
eager = model(a, b)
compiled = torch.compile(model, backend="inductor", fullgraph=True, dynamic=False)(a, b)
print(eager.dtype, compiled.dtype)
assert compiled.dtype == eager.dtype

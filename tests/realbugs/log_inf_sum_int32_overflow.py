"""
issue: https://github.com/pytorch/pytorch/issues/190421
title: [Inductor] OverflowError in index_propagation.TypedExpr when converting inf to int32 in sum
kind: crash
category: backend_failure
stage: inductor
culprit: aten.sum, aten.log
fails_on: torch 2.13.0+cpu: InductorError: OverflowError: cannot convert float infinity to integer
"""

import torch
def f():
    x = torch.full((2,), 0.0)
    y = torch.log(x)
    z = torch.sum(y, dtype=torch.int32).float()
    return z
e = f(); c = torch.compile(f)(); print(e, c); assert torch.equal(e, c)

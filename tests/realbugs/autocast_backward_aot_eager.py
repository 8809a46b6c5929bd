"""
issue: https://github.com/pytorch/pytorch/issues/179804
title: torch.compile + aot_eager: backward ignores inner autocast(enabled=False) vs eager
kind: wrong_result
category: accuracy
stage: aot_autograd
culprit: aten.mm, torch.amp.autocast(enabled=False) region in backward
fails_on: torch 2.13.0+cpu: weight gradient differs from eager (max abs diff ~0.02) with backend=aot_eager
"""

import torch, torch.nn as nn
w = nn.Linear(64, 64)
h = torch.randn(4, 64, dtype=torch.bfloat16, requires_grad=True)
def inner_fn(x):
    with torch.amp.autocast("cpu", enabled=False):
        return x.float() @ w.weight.float().T
with torch.amp.autocast("cpu", dtype=torch.bfloat16):
    oe = inner_fn(h)
with torch.amp.autocast("cpu", dtype=torch.bfloat16):
    oc = torch.compile(inner_fn, backend="aot_eager")(h)
oe.sum().backward(); ge = w.weight.grad.clone(); w.weight.grad = None
oc.sum().backward(); gc = w.weight.grad.clone()
assert torch.equal(ge, gc), (ge - gc).abs().max()

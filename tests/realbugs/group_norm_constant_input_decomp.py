"""
issue: https://github.com/pytorch/pytorch/issues/183120
title: torch.compile Inductor produces wrong output for BatchNorm2d + ELU + GroupNorm + log clamp chain
kind: wrong_result
category: accuracy
stage: decomp_partition
culprit: aten.native_group_norm (its decomposition; the compiler bisector on the duplicate #181696 names it)
fails_on: torch 2.13.0+cpu: max_diff = 1.288699 (GroupNorm of a constant input is not exactly 0 compiled; log(clamp) amplifies it)
"""

import torch
import torch.nn as nn

bn = nn.BatchNorm2d(5).eval()
elu = nn.ELU()
gn = nn.GroupNorm(5, 5).eval()

def fn():
    x = torch.ones([4, 5, 6, 6])
    t = bn(x)
    t = elu(t)
    t = gn(t)
    return torch.log(torch.clamp(t, min=1e-6))

eager = fn()

torch._dynamo.reset()
compiled = torch.compile(fn, backend="inductor")()

diff = (eager - compiled).abs().max().item()
print(f"max_diff = {diff:.6f}")
assert diff <= 1e-4, "BUG"

"""
issue: https://github.com/pytorch/pytorch/issues/196681
title: [inductor] CPU 2D-tiled reduction stores a full-width vector in the tail block: heap overflow (SIGABRT) or silent wrong results
kind: segfault
category: runtime_crash
stage: inductor
culprit: aten.bmm lowered to a mul+sum reduction over aten.constant_pad_nd / aten.permute inputs (the CPU 2D-tiled reduction's tail store)
fails_on: torch 2.13.0+cpu: SIGABRT from glibc heap checks (free(): invalid pointer / malloc assertion), once after printing a max abs diff of 20.2
"""

import torch
import torch.nn.functional as F

def f(x):
    v = (x * 0.5) * (torch.erf(x * 0.7071067811865476) + 1)   # GELU, x is channels_last
    a = v.permute(3, 2, 1, 0)                                  # (66, 66, 8, 1)
    p = F.pad(a, (0, 0, 0, 58), value=0.5)                     # (66, 66, 66, 1)
    q = F.pad(v, (0, 0, 0, 0, 0, 58), value=0.5)               # (1, 66, 66, 66)
    return torch.matmul(q, p)                                  # (66, 66, 66, 1)

torch.manual_seed(0)
x = torch.randn(1, 8, 66, 66).contiguous(memory_format=torch.channels_last)
ref = f(x)
out = torch.compile(f)(x)
print("max abs diff:", (out - ref).abs().max().item())
torch.testing.assert_close(out, ref)

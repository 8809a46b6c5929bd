"""
issue: https://github.com/pytorch/pytorch/issues/183901
title: torch.compile produces int32-overflowed results for int64 arange multiplication on CUDA
kind: wrong_result
category: accuracy
stage: inductor
culprit: aten.arange, aten.mul (int64 product computed in 32 bits)
fails_on: torch 2.13.0+cpu: compiled returns [0, 1500000000, -1294967296, ...], eager [0, 1500000000, 3000000000, ...]
"""

import torch


def f(x):
    return torch.arange(0, 9, device=x.device, dtype=torch.int64) * torch.tensor(
        [1500000000], dtype=torch.int64, device=x.device)


x = torch.zeros(1)  # the issue ran on CUDA; the CPU backend overflows the same way
eager = f(x)
compiled = torch.compile(f, backend="inductor")(x)
print("eager:", eager)
print("compiled:", compiled)
assert torch.equal(eager, compiled)

"""
issue: https://github.com/pytorch/pytorch/issues/194547
title: torch.compile silently promotes dtype for torch.distributions.Normal.sample() where eager preserves it
kind: wrong_result
category: accuracy
stage: decomp_partition
culprit: aten.normal (the Tensor_Tensor decomposition returns the promoted float32 where eager keeps the mean's float16)
fails_on: torch 2.13.0+cpu: compiled sample is float32, eager float16; torch 2.14.1 (CPU): same
"""

import torch

torch.manual_seed(1367)


def fn(loc, scale):
    d = torch.distributions.Normal(loc, scale)
    return d.sample()


loc = torch.zeros(8).to(torch.float16)
scale = torch.ones(8)  # float32
eager = fn(loc, scale)
compiled = torch.compile(fn)(loc, scale)
print(eager.dtype, compiled.dtype)
assert eager.dtype == compiled.dtype, f"eager {eager.dtype}, compiled {compiled.dtype}"

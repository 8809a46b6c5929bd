"""
issue: https://github.com/pytorch/pytorch/issues/189518
title: Inductor's pointless_cumsum_replacement drops cumsum's explicit dtype argument
kind: wrong_result
category: accuracy
stage: inductor
culprit: aten.cumsum with dtype= over aten.full (Inductor's pointless_cumsum_replacement pattern)
fails_on: torch 2.13.0+cpu: eager returns bfloat16, compiled returns int64
"""

import torch
def f():
    ones = torch.ones((2, 4, 4), dtype=torch.bool)
    return ones.cumsum(1, dtype=torch.bfloat16)
eager = f()
compiled = torch.compile(f)()
print(eager.dtype, compiled.dtype)
assert compiled.dtype == eager.dtype

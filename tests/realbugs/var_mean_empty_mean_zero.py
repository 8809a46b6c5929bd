"""
issue: https://github.com/pytorch/pytorch/issues/197108
title: [inductor] `torch.var_mean` / `torch.std_mean` on an empty tensor return mean `0.` instead of `nan` under `torch.compile`
kind: wrong_result
category: accuracy
stage: inductor
culprit: aten.var_mean (the fused welford reduction's identity gives mean 0. for zero elements)
fails_on: torch 2.13.0+cpu: var_mean of an empty tensor is (nan, 0.) compiled, (nan, nan) eager; torch 2.14.1 (CPU): same
"""

# The case in its smallest form (float32, shape (0,), default correction).
import torch


def f(x):
    return torch.var_mean(x)


x = torch.empty(0)
eager = f(x)
compiled = torch.compile(f)(x)
print(eager, compiled)
torch.testing.assert_close(compiled, eager, equal_nan=True)

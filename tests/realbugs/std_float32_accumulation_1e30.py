"""
issue: https://github.com/pytorch/pytorch/issues/197089
title: [inductor][cpu] `torch.std`/`var` accumulate in float32: inf/NaN for 1e30-scale inputs, and **zero output with an all-zero gradient** for 1e-30-scale inputs (eager and float64 are correct)
kind: wrong_result
category: accuracy
stage: decomp_partition
culprit: aten.std (decomposed into a float32 var/var_mean reduction, where eager CPU accumulates in double)
fails_on: torch 2.13.0+cpu: std of 1000 values of scale 1e30 is nan compiled (inf with aot_eager_decomp_partition), 1.03e30 eager; torch 2.14.1 (CPU): same
"""

# The issue describes the case in words (1e30-scale float32 inputs -> inf/NaN); this is that case.
import torch

torch.manual_seed(0)
x = torch.randn(1000) * 1e30


def f(x):
    return torch.std(x)


e = f(x)
c = torch.compile(f)(x)
print(e, c)
torch.testing.assert_close(c, e)

"""
issue: https://github.com/pytorch/pytorch/issues/194706
title: Inductor CPU backend emits error when calculating gradients
kind: crash
category: kernel_failure
stage: inductor
culprit: aten.prod, aten.sum
fails_on: torch 2.13.0+cpu: CppCompileError: conflicting declaration 'auto at_Half_tmp_acc1_vec' (fp16 reductions of jacfwd)
"""

import torch
def f(x):
    return torch.sum(torch.mm(torch.mm(torch.prod(x) + x, torch.sum(x) + x), torch.sum(x) + x))
x = (torch.arange(1, 10, dtype=torch.float16) / 10).reshape(3, 3)
e = torch.func.jacfwd(f)(x)
c = torch.compile(torch.func.jacfwd(f))(x)
torch.testing.assert_close(e, c)

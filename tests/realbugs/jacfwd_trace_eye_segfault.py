"""
issue: https://github.com/pytorch/pytorch/issues/190856
title: torch.inductor SIGSEGV at runtime when compiling `jacfwd(jacfwd(f))` and `f` contains `trace(t) * eye(n)`
kind: segfault
category: runtime_crash
stage: inductor
culprit: aten.eye, aten.trace
fails_on: torch 2.13.0+cpu: SIGSEGV (exit 139)
"""

import torch
def f(t):
    return torch.trace(t) * torch.eye(3)
x = torch.randn(3, 3)
e = torch.func.jacfwd(torch.func.jacfwd(f))(x)
c = torch.compile(torch.func.jacfwd(torch.func.jacfwd(f)))(x)
torch.testing.assert_close(e, c)

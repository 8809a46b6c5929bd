"""
issue: https://github.com/pytorch/pytorch/issues/197067
title: `torch.compile` SEGFAULTs on a ZeroTensor produced by a normal autograd path (gradient of `torch.sgn`)
kind: segfault
category: runtime_crash
stage: aot_autograd
culprit: aten.select on a ZeroTensor input
fails_on: torch 2.13.0+cpu: SIGSEGV (exit 139) with inductor; with aot_eager AOTAutograd already fails (RuntimeError: aten::expand() ... found type int)
"""

import torch
x = torch.randn(3, requires_grad=True)
z = torch.autograd.grad(torch.sgn(x).sum(), x)[0]
assert z._is_zerotensor()
def fn(t):
    return t[-1] + 10
print(fn(z))
print(torch.compile(fn, backend="inductor")(z))

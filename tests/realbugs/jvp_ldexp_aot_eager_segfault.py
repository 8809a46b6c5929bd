"""
issue: https://github.com/pytorch/pytorch/issues/197086
title: [aot_autograd] process crash (access violation) when `torch.func.jvp` over `torch.ldexp` is compiled with `backend="aot_eager"`
kind: segfault
category: runtime_crash
stage: aot_autograd
culprit: aten.ldexp (forward AD)
fails_on: torch 2.13.0+cpu: SIGSEGV (exit 139) with backend=aot_eager
"""

import torch
torch.manual_seed(0)
e = torch.randint(-3, 3, (3, 4)).float()
f = lambda a: torch.ldexp(a, e)
x, t = torch.randn(3, 4), torch.randn(3, 4)
ref = torch.func.jvp(f, (x,), (t,))
out = torch.compile(lambda x, t: torch.func.jvp(f, (x,), (t,)), backend="aot_eager")(x, t)
torch.testing.assert_close(ref, out)

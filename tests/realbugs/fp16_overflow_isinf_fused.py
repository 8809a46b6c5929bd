"""
issue: https://github.com/pytorch/pytorch/issues/183607
title: torch.compile changes fp16 overflow behavior for cast-to-float16 multiplication
kind: wrong_result
category: accuracy
stage: inductor
culprit: aten.mul, aten.isinf, aten.div, aten.where (fp16 intermediate kept in fp32 inside the fused kernel)
fails_on: torch 2.13.0+cpu: compiled returns [inf, 300.0, False, inf], eager [inf, inf, True, 0.0]
workaround: torch._inductor.config.emulate_precision_casts = True (named in the thread: comment by cuiliaomei-beep, torch._inductor.config.patch(emulate_precision_casts=True) matches eager; checked: the script passes with it on torch 2.13.0+cpu)
"""

import torch


def f(x):
    y = x * x
    return y, y / x, torch.isinf(y), torch.where(torch.isinf(y), torch.zeros_like(y), y)


x = torch.full((40,), 300.0, dtype=torch.float16)
eager = f(x)
compiled = torch.compile(f)(x)
print("eager   ", [o[0].item() for o in eager])
print("compiled", [o[0].item() for o in compiled])
for e, c in zip(eager, compiled):
    torch.testing.assert_close(c, e, equal_nan=True)

"""
issue: https://github.com/pytorch/pytorch/issues/182131
title: torch.compile/Inductor produces different result for float16 cast before elementwise add
kind: wrong_result
category: accuracy
stage: inductor
culprit: aten._to_copy (fp32 -> fp16 casts of both aten.add operands elided by fusion), aten.where
fails_on: torch 2.13.0+cpu: 8/24 elements differ by one fp16 ulp (max abs diff 0.00098), sum 20.5996 vs 20.6000
workaround: torch._inductor.config.emulate_precision_casts = True (named in the thread: BoyuanFeng in PR #182882, which closed it, TORCHINDUCTOR_EMULATE_PRECISION_CASTS=1 fixes the repro; checked: the script passes with it on torch 2.13.0+cpu)
"""

import torch

print(torch.__version__)

x = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4) / 10
c = (torch.arange(24) % 5 == 0).reshape(2, 3, 4)


def f(x, c):
    z = torch.where(c, torch.full_like(x, 0.5), torch.full_like(x, -0.5))
    y = z.to(torch.float16) + x.to(torch.float16)
    return y, y.float().sum()


eager = f(x, c)
compiled = torch.compile(f, backend="inductor", fullgraph=True)(x, c)

print("eager sum:   ", eager[1])
print("compiled sum:", compiled[1])
print("max diff:    ", (eager[0].float() - compiled[0].float()).abs().max())

torch.testing.assert_close(compiled[0], eager[0], rtol=0, atol=0)
torch.testing.assert_close(compiled[1], eager[1], rtol=0, atol=0)

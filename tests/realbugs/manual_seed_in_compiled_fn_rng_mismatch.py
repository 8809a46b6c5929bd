"""
issue: https://github.com/pytorch/pytorch/issues/118735
title: [torch.compile] default generator manual_seed() gave different random outputs with/without torch.compile
kind: wrong_result
category: accuracy
stage: inductor
culprit: aten.rand (drawn by Inductor's own RNG after torch.manual_seed inside the compiled function, not eager's)
fails_on: torch 2.13.0+cpu: t2 is 0.0502 compiled and 0.8823 eager (t1, from an explicit generator, matches)
workaround: torch._inductor.config.fallback_random = True (named in the thread: eellison, comment of 2024-01-31, "You can set `torch._inductor.config.fallback_random = True` to use the same RNG as eager, but it will be slower"; checked: the script passes with it on torch 2.13.0+cpu)
"""
import torch


def func():
    g = torch.Generator().manual_seed(42)
    t1 = torch.rand(1, generator=g)
    torch.manual_seed(42)
    t2 = torch.rand(1)
    return t1, t2


eager = func()
compiled = torch.compile(func)()
print(eager, compiled)
torch.testing.assert_close(compiled, eager)

"""
issue: https://github.com/pytorch/pytorch/issues/197895
title: [inductor] Floating-point floor division is off by one: `torch.compile` makes `1.0 // 0.1` return `10.0` (eager and Python: `9.0`)
kind: wrong_result
category: accuracy
stage: inductor
culprit: aten.div.Tensor_mode, aten.floor_divide
fails_on: torch 2.13.0+cpu: 1.0 // 0.1 gives 10.0 compiled, 9.0 eager
"""

import torch
a = torch.tensor([1.0, 0.5, 6.0, 1.0]); b = torch.tensor([0.1, 0.1, 0.2, 1 / 3])
f = lambda a, b: a // b
e = f(a, b); c = torch.compile(f)(a, b); print(e, c); torch.testing.assert_close(e, c)

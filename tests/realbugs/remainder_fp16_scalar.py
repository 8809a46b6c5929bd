"""
issue: https://github.com/pytorch/pytorch/issues/183083
title: `torch.remainder` returns incorrect results with float16 tensor and Python scalar on Inductor CPU
kind: wrong_result
category: accuracy
stage: inductor
culprit: aten.remainder
fails_on: torch 2.13.0+cpu: remainder(3.140625, 3.14) in fp16 is 6.2e-4 compiled, 0 eager
"""

import torch
def f(x):
    return torch.remainder(x, 3.14)
x = torch.tensor([-4.0, -1.5, -0.0, 0.0, 0.1, 1.0, 3.140625, 8.0], dtype=torch.float16)
e = f(x); c = torch.compile(f, backend="inductor")(x); print(e, c); torch.testing.assert_close(e, c)

"""
issue: https://github.com/pytorch/pytorch/issues/191499
title: [Inductor][CPU] torch.compile returns 0 for short positive uint8/int8 amin reductions on Apple Silicon
kind: wrong_result
category: accuracy
stage: inductor
culprit: aten.amin
fails_on: torch 2.13.0+cpu: amin of 18 uint8 values is 0 compiled, 1 eager
"""

import torch
pos = torch.tensor([5, 1, 100, 3, 7, 8, 9, 13, 100, 120, 127, 2, 6, 4, 11, 12, 90, 80])
x = pos.to(torch.uint8)
e = torch.amin(x); c = torch.compile(torch.amin)(x.clone())
print(e, c); assert e.item() == c.item()

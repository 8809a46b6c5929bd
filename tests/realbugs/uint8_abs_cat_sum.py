"""
issue: https://github.com/pytorch/pytorch/issues/187018
title: abs on uint8 silently miscompiled via std::abs integer promotion
kind: wrong_result
category: accuracy
stage: inductor
culprit: aten.abs
fails_on: torch 2.13.0+cpu: compiled sum is -800 where eager gives 224 (uint8 abs promoted to int in the C++ kernel)
"""

import torch
def f_bug(x):
    y = -x.abs()
    return torch.cat([y, y]).sum()
x = torch.tensor([200, 200], dtype=torch.uint8)
e = f_bug(x); c = torch.compile(f_bug)(x)
print(e, c); assert e.item() == c.item()

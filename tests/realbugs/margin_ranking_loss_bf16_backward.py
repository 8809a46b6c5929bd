"""
issue: https://github.com/pytorch/pytorch/issues/185517
title: [Inductor][CPU][bf16] Gradient mismatch in F.margin_ranking_loss backward with bfloat16 tensors and float scalar
kind: wrong_result
category: accuracy
stage: inductor
culprit: aten.margin_ranking_loss, aten.clamp_min
fails_on: torch 2.13.0+cpu: input1.grad is 0 compiled, 0.5 eager
"""

import torch
x_val = 1.703125; margin_val = 1.7
def fn(x, y, t):
    return torch.nn.functional.margin_ranking_loss(x, y, t, margin=margin_val, reduction='mean')
def grads(f):
    input1 = torch.tensor([x_val, x_val], dtype=torch.bfloat16, requires_grad=True)
    input2 = torch.tensor([0.0, 0.0], dtype=torch.bfloat16, requires_grad=True)
    target = torch.tensor([1.0, 1.0], dtype=torch.bfloat16)
    f(input1, input2, target).backward()
    return input1.grad
e = grads(fn); c = grads(torch.compile(fn)); print(e, c); torch.testing.assert_close(e, c)

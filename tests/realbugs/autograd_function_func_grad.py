"""
issue: https://github.com/pytorch/pytorch/issues/193279
title: Dynamo silently drops custom `backward` of `autograd.Function` under `torch.func.grad`, producing wrong gradients
kind: wrong_result
category: accuracy
stage: dynamo
culprit: torch.autograd.Function custom backward under torch.func.grad
fails_on: torch 2.13.0+cpu: compiled gradient is cos(x), eager (custom backward) is zeros
"""

import torch
class SinWithZeroBackward(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return torch.sin(x)
    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)
    @staticmethod
    def backward(ctx, grad):
        return torch.zeros_like(grad)
def loss(x):
    return SinWithZeroBackward.apply(x).sum()
x = torch.randn(4)
e = torch.func.grad(loss)(x); c = torch.compile(torch.func.grad(loss))(x)
print(e, c); torch.testing.assert_close(e, c)

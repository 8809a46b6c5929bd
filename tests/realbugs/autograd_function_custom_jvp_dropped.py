"""
issue: https://github.com/pytorch/pytorch/issues/192985
title: Dynamo silently drops custom `jvp` of `autograd.Function` under `torch.func.jvp`, producing wrong tangents
kind: wrong_result
category: accuracy
stage: dynamo
culprit: torch.autograd.Function with a custom jvp, inlined by Dynamo under torch.func.jvp (aten.sin's default forward-AD rule used instead)
fails_on: torch 2.13.0+cpu: the compiled tangent is cos(x)*dx, eager returns the custom jvp's zeros
"""

import torch


class SinWithZeroJvp(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return torch.sin(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_forward(*inputs)
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        return torch.zeros_like(grad)

    @staticmethod
    def jvp(ctx, dx):
        return torch.zeros_like(dx)


def f(x, dx):
    return torch.func.jvp(SinWithZeroJvp.apply, (x,), (dx,))[1]


x, dx = torch.randn(4), torch.randn(4)
eager = f(x, dx)
compiled = torch.compile(f, fullgraph=True)(x, dx)
print("eager:", eager)
print("compiled:", compiled)
torch.testing.assert_close(compiled, eager)

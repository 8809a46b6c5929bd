"""`torch.func.grad` over an `autograd.Function`, compiled: Dynamo's graph computes the gradient
itself (`_autograd_grad` between functorch's nesting calls), so it must run under the program's grad
mode, which the check must keep. With the argument `off_by_one`, a backend that adds 1 to every
output: the graph fails, and the minifier cannot load it (FX cannot trace `_wrap_for_grad`)."""
import sys

import torch


def off_by_one(gm, example_inputs):
    return lambda *args: tuple(out + 1 for out in gm(*args))


class Square(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


def loss(x):
    return Square.apply(x).sum()


backend = off_by_one if sys.argv[1:] == ["off_by_one"] else "inductor"
print(torch.compile(torch.func.grad(loss), backend=backend)(torch.arange(4.0)).tolist())

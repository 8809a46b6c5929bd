"""`torch.func.grad` over an `autograd.Function`, compiled: Dynamo's graph computes the gradient
itself (`_autograd_grad` between functorch's nesting calls), so it must run under the program's grad
mode, which the check must keep."""
import torch


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


print(torch.compile(torch.func.grad(loss), backend="inductor")(torch.arange(4.0)).tolist())

"""Planted AOTAutograd failure: a custom op with no autograd formula, called on an input that requires
grad. Eager and backend='eager' run the forward fine; AOTAutograd traces the backward at compile time
and fails."""
import torch


@torch.library.custom_op("pt2doctor_test::scale", mutates_args=())
def scale(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@scale.register_fake
def _(x):
    return torch.empty_like(x)


def f(x):
    return torch.sin(scale(x)) + 1


x = torch.randn(8, requires_grad=True)
print(torch.compile(f)(x).sum())

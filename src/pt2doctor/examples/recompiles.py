"""A function that recompiles: a new size, a new dtype, and a Python int that changes."""
import torch


def scale(x, factor):
    return torch.sin(x) * factor


compiled = torch.compile(scale, backend="eager")
compiled(torch.randn(8), 2)
compiled(torch.randn(9), 2)                       # size at dim 0 changed
compiled(torch.randn(9, dtype=torch.float64), 2)  # dtype changed
compiled(torch.randn(9), 3)                       # the int `factor` changed

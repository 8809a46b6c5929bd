"""f, g, f compiled (f twice: a new shape), then `torch._dynamo.reset()`, then the same again: torch
numbers the second round's frames 0/0, 1/0, ... again (issue #30)."""
import torch


def f(x):
    return x * 2


def g(x):
    return torch.sin(x)


for round_ in range(2):
    cf, cg = torch.compile(f, backend="eager"), torch.compile(g, backend="eager")
    for i in range(3): cf(torch.ones(3))
    for i in range(2): cg(torch.ones(3))
    cf(torch.ones(4, 4))
    torch._dynamo.reset()

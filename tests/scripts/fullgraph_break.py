import torch


def f(x):
    print("inside")
    return x + 1


torch.compile(f, backend="eager", fullgraph=True)(torch.randn(3))

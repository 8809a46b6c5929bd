import torch


def f(x):
    return x + 1


torch.compile(f, backend="eager")(torch.randn(3))
raise ValueError("the script's own bug")

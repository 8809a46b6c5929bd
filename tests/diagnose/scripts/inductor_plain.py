import torch


def f(x):
    return torch.relu(x.cos()) * 2


print(torch.compile(f)(torch.randn(16)).sum())

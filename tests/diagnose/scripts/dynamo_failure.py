"""Planted Dynamo failure: data-dependent control flow under fullgraph=True."""
import torch


def f(x):
    y = torch.cos(x)
    if y.sum() > 0:  # a graph break; fullgraph=True turns it into an error
        return y + 1
    return y - 1


torch.compile(f, fullgraph=True)(torch.randn(8))

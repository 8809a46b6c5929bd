"""A custom backend defined in the script that cannot handle one op (sigmoid)."""
import torch


def picky_backend(gm, example_inputs):
    for node in gm.graph.nodes:
        if node.target in (torch.sigmoid, torch.Tensor.sigmoid):
            raise NotImplementedError("picky_backend cannot compile sigmoid")
    return gm.forward


def f(x):
    y = torch.cos(x) + 1
    y = torch.sigmoid(y) * 3
    return torch.sin(y)


torch.compile(f, backend=picky_backend)(torch.randn(8))

"""A backend that cannot compile torch.cond: the minimal graph holds a higher-order op, which has no short form in
PyTorch's idiom, so the short repro is the program reduced."""
import torch


def no_cond(gm, example_inputs):
    if any("cond" in str(node.target) for node in gm.graph.nodes):
        raise NotImplementedError("this backend cannot compile torch.cond")
    return gm.forward


def f(x, w):
    y = torch.sin(x) * w
    z = torch.cond(y.sum() > 0, lambda t: t.cos(), lambda t: t.exp(), (y,))
    return torch.relu(z) + 1


x, w = torch.randn(8), torch.randn(8)
print(f(x, w).sum())
print(torch.compile(f, backend=no_cond)(x, w).sum())

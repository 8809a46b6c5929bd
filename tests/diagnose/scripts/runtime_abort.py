"""A custom backend whose compiled code aborts the process (SIGABRT) when the graph has a sigmoid."""
import os

import torch


def aborting_backend(gm, example_inputs):
    if any(node.target in (torch.sigmoid, torch.Tensor.sigmoid) for node in gm.graph.nodes):
        def run(*args):
            os.abort()
        return run
    return gm.forward


def f(x):
    y = torch.cos(x) + 1
    return torch.sin(torch.sigmoid(y) * 3)


torch.compile(f, backend=aborting_backend)(torch.randn(8))
print("not reached")

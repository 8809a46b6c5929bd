"""Planted accuracy bug: the compiled relu adds 1. The script checks compiled against eager itself."""
import torch

torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"


def f(x):
    return torch.sin(torch.relu(torch.cos(x) * 2)) + 1


x = torch.randn(16)
torch.testing.assert_close(torch.compile(f)(x), f(x))

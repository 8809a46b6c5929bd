"""Planted Inductor codegen failure: the C++ backend emits broken code for relu."""
import torch

torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "compile_error"


def f(x):
    y = torch.cos(x) * 2
    y = torch.relu(y + 1)
    return torch.sin(y) - 3


torch.compile(f)(torch.randn(16))

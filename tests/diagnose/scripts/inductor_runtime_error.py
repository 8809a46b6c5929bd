"""Planted run-time kernel failure: the compiled relu kernel throws a C++ exception."""
import torch

torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "runtime_error"


def f(x):
    return torch.sin(torch.relu(torch.cos(x) * 2)) + 1


torch.compile(f)(torch.randn(16))
print("not reached")

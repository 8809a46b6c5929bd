"""A chain of pointwise ops with Inductor's planted relu accuracy bug (the relu gains +1)."""
import torch
import torch._inductor.config

torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"


def chain(x):
    x = torch.sin(x) * 2
    x = x + 1
    x = torch.relu(x)
    x = torch.cos(x) - 0.5
    return x * x


torch.manual_seed(0)
print(torch.compile(chain)(torch.randn(64, 32)).sum().item())

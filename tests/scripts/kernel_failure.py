import torch

torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "compile_error"


def f(x):
    return torch.relu(torch.cos(x)) + 1


torch.compile(f)(torch.randn(8))

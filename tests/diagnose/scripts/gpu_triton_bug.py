"""Planted Triton codegen failure on CUDA (the GPU twin of inductor_compile_error.py).

BUG (argv[1], default compile_error) is `torch._inductor.config.triton.inject_relu_bug_TESTING_ONLY`."""
import sys

import torch

torch._inductor.config.triton.inject_relu_bug_TESTING_ONLY = sys.argv[1] if len(sys.argv) > 1 else "compile_error"


def f(x):
    y = torch.cos(x) * 2
    y = torch.relu(y + 1)
    return torch.sin(y) - 3


x = torch.randn(4096, device="cuda")
out = torch.compile(f)(x)
torch.testing.assert_close(out, f(x))

"""A test harness that catches a failing compile and reports its own assertion (issue #39, point 4): the planted
Inductor codegen failure of inductor_compile_error.py, under the script's try/except."""
import torch

torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "compile_error"


def f(x):
    return torch.relu(x) + 1


x = torch.randn(8)
try:
    same = torch.allclose(torch.compile(f)(x), f(x))
except Exception:
    same = False
assert same, "compiled f does not match eager"

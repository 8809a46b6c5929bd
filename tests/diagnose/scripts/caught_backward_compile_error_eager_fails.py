"""A backward graph's compile fails at `backward()`, the script catches it and exits 1, and with compilation off it
fails too, otherwise (its eager path raises, caught alike): pytorch#145208's shape, where eager flex_attention's
backward fails in vmap. Only compiling raises the backend's failure."""

import sys

import torch
from torch._dynamo.backends.common import aot_autograd


def bw_compiler(gm, example_inputs):
    raise RuntimeError("backward lowering failed")


backend = aot_autograd(fw_compiler=lambda gm, example_inputs: gm, bw_compiler=bw_compiler)


def f(t):
    if not torch.compiler.is_compiling():
        raise RuntimeError("the eager path has a bug of its own")
    return (t.sin() * 2).sum()


x = torch.randn(8, requires_grad=True)
reference = (x.detach().sin() * 2).sum()
print("reference", reference)
try:
    torch.compile(f, backend=backend)(x).backward()
except RuntimeError as exc:
    print(f"FAIL: the compiled backward raised {type(exc).__name__}")
    sys.exit(1)

"""A backward graph's compile fails at `backward()` (AOTAutograd compiles it lazily, the backend's backward compiler
raises); the script catches it and exits 1 (pytorch#145208's shape: a flex_attention backward failing to lower).
With "raise" as its argument it does not catch it."""

import sys

import torch
from torch._dynamo.backends.common import aot_autograd


def bw_compiler(gm, example_inputs):
    raise RuntimeError("backward lowering failed")


backend = aot_autograd(fw_compiler=lambda gm, example_inputs: gm, bw_compiler=bw_compiler)
x = torch.randn(8, requires_grad=True)
if sys.argv[1:] == ["raise"]:
    torch.compile(lambda t: (t.sin() * 2).sum(), backend=backend)(x).backward()
try:
    torch.compile(lambda t: (t.sin() * 2).sum(), backend=backend)(x).backward()
except RuntimeError as exc:
    print(f"FAIL: the compiled backward raised {type(exc).__name__}")
    sys.exit(1)

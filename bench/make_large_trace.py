"""Generate a large TORCH_TRACE for bench/report.py: ~120 distinct functions compiled with Inductor,
three shapes each (about 160 MB of trace). Usage: TORCH_TRACE=DIR python bench/make_large_trace.py [N [START]]
(START: the first function's number, so several processes can each make a share; concatenate their logs).
"""
from __future__ import annotations

import sys

import torch

N = int(sys.argv[1]) if len(sys.argv) > 1 else 120
START = int(sys.argv[2]) if len(sys.argv) > 2 else 0
OPS = (torch.sin, torch.cos, torch.tanh, torch.sigmoid, torch.relu, torch.exp)


def make(i: int):
    """A distinct function (its own code object, so its own Dynamo cache) of 6-14 ops."""
    ops = [OPS[(i + k) % len(OPS)].__name__ for k in range(6 + i % 9)]
    body = "\n".join(f"    y = torch.{op}(y @ w) + y * {k + 1}" for k, op in enumerate(ops))
    source = f"def block_{i}(x, w):\n    y = x\n{body}\n    return y.sum(dim=-1)\n"
    namespace = {"torch": torch}
    exec(compile(source, f"<block_{i}>", "exec"), namespace)
    return namespace[f"block_{i}"]


torch._dynamo.config.automatic_dynamic_shapes = False  # three static shapes: three compiles each
torch._dynamo.config.recompile_limit = 16
for i in range(START, START + N):
    compiled = torch.compile(make(i))
    for n in (8, 16, 32):
        compiled(torch.randn(n, 16), torch.randn(16, 16))
    print(f"compiled block_{i}", flush=True)

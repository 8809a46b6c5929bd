"""A kernel error that surfaces after the compiled graph returned, as CUDA reports one; simulated on CPU.

CUDA does not raise a kernel's error (a device-side assert, an illegal address) at its launch but at
some later synchronizing call, unless CUDA_LAUNCH_BLOCKING=1 makes launches synchronous. This
backend's graph "launches" a failing kernel: with CUDA_LAUNCH_BLOCKING=1 the error is raised inside
the compiled call, otherwise only at the script's next "synchronizing" line, after the graph returned.
"""

import os

import torch

MESSAGE = ("CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously reported at some "
           "other API call, so the stacktrace below might be incorrect.")
pending = []


def launching_backend(gm, example_inputs):
    def run(*args):
        out = gm(*args)
        if os.environ.get("CUDA_LAUNCH_BLOCKING") == "1":
            raise RuntimeError(MESSAGE)
        pending.append(MESSAGE)
        return out

    return run


@torch.compile(backend=launching_backend)
def f(x):
    return torch.relu(x) * 2


y = f(torch.randn(8))
if pending:  # the next synchronizing call
    raise RuntimeError(pending.pop())
print(y.sum().item())

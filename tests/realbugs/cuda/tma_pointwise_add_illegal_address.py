"""
issue: https://github.com/pytorch/pytorch/issues/183325
title: torch.compile + TMA path : Illegal Memory Access
kind: crash
category: runtime_crash
stage: inductor
culprit: aten.add lowered through Inductor's TMA path (triton.use_tensor_descriptor): the pointwise kernel's tensor-descriptor access goes out of bounds once the tensor reaches ~43M elements (memcheck: 2 GiB before the allocation, an offset that wrapped)
fails_on: torch 2.11.0+cu130 on H200 (reported on main, GB200): torch.AcceleratorError: CUDA error: an illegal memory access was encountered; eager runs
"""

import torch
import torch._inductor.config as inductor_config

# The bug is in the (experimental) TMA path for pointwise kernels.
inductor_config.triton.use_tensor_descriptor = True
inductor_config.assume_aligned_inputs = True


def fn(x, r):
    return x + r


# The reporter swept shapes; failures started at ~43M elements: 8192 x 8192 is 67M (134 MB per bf16 tensor).
inputs = (
    torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda"),
    torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda"),
)
expected = fn(*inputs)
actual = torch.compile(fn, fullgraph=True)(*inputs)
torch.cuda.synchronize()
torch.testing.assert_close(actual, expected)
print("ok")

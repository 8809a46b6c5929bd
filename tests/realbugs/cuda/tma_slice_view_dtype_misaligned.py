"""
issue: https://github.com/pytorch/pytorch/issues/184714
title: [TMA] Failure when running slice+view operations with TMA enabled on H100
kind: crash
category: runtime_crash
stage: inductor
culprit: aten.slice then aten.view.dtype (x[2:].view(torch.float32)), folded into a reinterpret_tensor whose data pointer is 4-byte aligned (in V.graph.unaligned_buffers), which TMACompatibilityChecker never consulted: a TMA descriptor on a misaligned base (fix PR #184717)
fails_on: torch 2.11.0+cu130 on H200 (reported on main, H100): torch.AcceleratorError: CUDA error: misaligned address (memcheck: misaligned shared or local address in triton_poi_fused_add_0); eager runs
"""

import torch
import torch._inductor.config as inductor_config

# The bug is in the (experimental) TMA path for pointwise kernels.
inductor_config.triton.use_tensor_descriptor = True
inductor_config.assume_aligned_inputs = True

offset = 1


def fn(x):
    return x[2:].view(dtype=torch.float32) + 1


inputs = (torch.randn((128 + offset) * 2, dtype=torch.bfloat16, device="cuda"),)

expected = fn(*inputs)
actual = torch.compile(fn)(*inputs)
torch.cuda.synchronize()
torch.testing.assert_close(actual, expected)
print("ok")

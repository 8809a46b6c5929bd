"""
issue: https://github.com/pytorch/pytorch/issues/184563
title: [TMA] `TMACompatibilityChecker` fails to detect misalignment when the input pointer has a `constant_offset`
kind: crash
category: runtime_crash
stage: inductor
culprit: aten.slice (x[1:]) read through Inductor's TMA path: the kernel builds tl.make_tensor_descriptor(in_ptr0 + 1, ...); TMACompatibilityChecker checked strides but not constant_offset * itemsize % 16, so the descriptor's base is not 16-byte aligned (fix PR #184564)
fails_on: torch 2.11.0+cu130 on H200: torch.AcceleratorError: CUDA error: misaligned address (memcheck: misaligned shared or local address in triton_poi_fused_add_slice_0); eager runs
"""

import torch
import torch._inductor.config as inductor_config

# The bug is in the (experimental) TMA path for pointwise kernels.
inductor_config.triton.use_tensor_descriptor = True
inductor_config.assume_aligned_inputs = True


def fn(x):
    return x[1:] + 1


inputs = (torch.randn(1025, device="cuda"),)

expected = fn(*inputs)
actual = torch.compile(fn)(*inputs)
torch.cuda.synchronize()
torch.testing.assert_close(actual, expected)
print("ok")

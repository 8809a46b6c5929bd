"""
issue: https://github.com/pytorch/pytorch/issues/197493
title: Inductor split-scan workspace sizing can be overrun by an undersized R0_BLOCK, causing silent memory corruption
kind: wrong_result
category: accuracy
stage: inductor
culprit: aten.cumsum as Inductor's split scan: the split-scan (decoupled look-back cumsum) workspace is sized for R0_BLOCK >= triton.min_split_scan_rblock (256) but coordinate-descent tuning only honours inductor_meta["min_rblock"], so it benchmarks/selects R0_BLOCK=128, launching twice the scan programs that read and write past the workspace (8192*ceil(576/256)*8 = 196608 bytes allocated, 327680 needed)
fails_on: torch 2.11.0+cu130 on H200 (reported on 2.13, H100, max-autotune): wrong values, greatest absolute difference 102.9, no CUDA error; memcheck: invalid atomic of 8 bytes in triton_spl_fused_cumsum_0, 5,289 bytes after an allocation of 196,608 bytes
"""

import torch
import torch._inductor.config as inductor_config

# The reporter used mode="max-autotune"; the part that matters is coordinate
# descent tuning.  Starting from R0_BLOCK=256 it benchmarks the neighbour
# R0_BLOCK=128, and that launch already writes past the workspace; whether 128
# then wins (and is used on every call) depends on timing.
inductor_config.coordinate_descent_tuning = True


def fn(v):
    # Informer-style ProbAttention context: cumulative sum over the sequence.
    # Pointwise numel 16*8*64 = 8192, scan length 576: an outer SplitScan whose
    # workspace matches the numbers in the issue.
    return v.cumsum(dim=-2)


compiled = torch.compile(fn)
for step in range(5):  # stale look-back flags from an earlier call corrupt later ones
    inputs = (torch.randn(16, 8, 576, 64, device="cuda"),)
    before = inputs[0].clone()
    expected = fn(*inputs)
    actual = compiled(*inputs)
    torch.cuda.synchronize()
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(inputs[0], before, rtol=0, atol=0)
print("ok")

"""
issue: https://github.com/pytorch/pytorch/issues/186241
title: TMA descriptor loads use stale `xoffset` in mix-order reduction loop
kind: wrong_result
category: accuracy
stage: inductor
culprit: aten.sum in the mix-order reduction kernel (RMSNorm backward: row + column reductions fused), TMA descriptor loads/stores index with the scalar xoffset, which is never advanced in the `for ... in tl.range(0, split_size, XBLOCK)` loop (only xindex is), so every iteration touches the first tile; with NUM_STAGES >= 3 it also hits a CUDA misaligned address
fails_on: torch 2.11.0+cu130 on H200 (reported on main): wrong x.grad (greatest absolute difference 22.75), no CUDA error, memcheck finds none (the stale offset reads valid memory); fix PR #192344, merged 2026-08
"""

import torch
import torch._inductor.config as inductor_config

# The bug is in the (experimental) TMA path combined with mix-order reductions.
inductor_config.triton.use_tensor_descriptor = True
inductor_config.assume_aligned_inputs = True


def f(x, w, eps):
    orig_dtype = x.dtype
    x = x.float()
    rsqrt = torch.rsqrt((x * x).sum(dim=-1) / x.shape[-1] + eps)
    return (x * rsqrt[:, None] * w).to(dtype=orig_dtype)


def grads(fwd, x, w, dy):
    x = x.detach().requires_grad_(True)
    w = w.detach().requires_grad_(True)
    fwd(x, w, 1e-5).backward(dy)
    torch.cuda.synchronize()
    return x.grad, w.grad


torch.manual_seed(1337)
M, N = 200000, 256  # ~100 MB per bf16 [M, N] tensor (the report had 1,000,000 rows)
inputs = (
    torch.randn(M, N, dtype=torch.bfloat16, device="cuda"),
    torch.randn(N, dtype=torch.bfloat16, device="cuda"),
    torch.randn(M, N, dtype=torch.bfloat16, device="cuda"),
)

expected = grads(f, *inputs)
actual = grads(torch.compile(f, options={"split_reductions": False}), *inputs)
torch.cuda.synchronize()
# x.grad is per-element; w.grad sums a million rows, so allow for rounding of
# different (fp32) accumulation orders before the final bf16 cast.
torch.testing.assert_close(actual[0], expected[0], rtol=2e-2, atol=2e-2)
torch.testing.assert_close(actual[1], expected[1], rtol=2e-2, atol=1.0)
print("ok")

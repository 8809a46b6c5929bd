"""
issue: https://github.com/pytorch/pytorch/issues/186536
title: [inductor] Dynamic-shape `searchsorted`-derived index trips a device-side bounds assert on in-bounds CUDA inputs
kind: crash
category: runtime_crash
stage: inductor
culprit: aten.searchsorted on a slice (offsets[1:]): Inductor's bucketize searches the sliced buffer from its start, ignoring the slice's offset (pytorch#182343), so a computed index lands past the end
fails_on: torch 2.11.0+cu130: RuntimeError: CUDA driver error: device-side assert triggered, in the fused Triton kernel's bounds check `index out of bounds: 0 <= tmp < (-1) + ks0`; eager and backend='aot_eager_decomp_partition' run
"""

import torch


def token_lengths(values, offsets):
    flat = torch.arange(values.size(0), device=values.device)
    seq = torch.searchsorted(offsets[1:], flat, right=True)  # which packed sequence each token is in
    lengths = offsets[1:] - offsets[:-1]
    return values * lengths[seq]


offsets = torch.tensor([0, 3, 8, 10, 16], device="cuda")
values = torch.randn(16, device="cuda")
expected = token_lengths(values, offsets)
actual = torch.compile(token_lengths, dynamic=True)(values, offsets)
torch.cuda.synchronize()
torch.testing.assert_close(actual, expected)
print("ok")

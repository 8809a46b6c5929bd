"""
issue: https://github.com/pytorch/pytorch/issues/182343
title: Torch Inductor SearchSorted SliceView Bug
kind: crash
category: backend_failure
stage: inductor
culprit: aten.searchsorted on a slice of a constant (offsets[1:]): Inductor's lowering asks the SliceView for its stride
fails_on: torch 2.11.0+cu130: torch._inductor.exc.InductorError: NotImplementedError: SliceView; eager runs
"""

import torch


def bucket(values):
    offsets = torch.tensor([0, 3, 7, 12], device=values.device)
    return torch.searchsorted(offsets[1:], values, right=True)


values = torch.tensor([0, 2, 3, 6, 7, 11], device="cuda")
expected = bucket(values)
actual = torch.compile(bucket)(values)
torch.cuda.synchronize()
torch.testing.assert_close(actual, expected)
print("ok")

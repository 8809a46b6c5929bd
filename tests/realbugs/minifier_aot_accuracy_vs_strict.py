"""
issue: https://github.com/pytorch/pytorch/blob/main/test/inductor/test_minifier.py (MinifierTests.test_accuracy_vs_strict_accuracy)
title: PyTorch minifier test: accuracy error after AOT with two planted bugs (relu and log1p) and boolean intermediates
kind: wrong_result
category: accuracy
stage: inductor
culprit: aten.relu, aten.log1p
fails_on: torch 2.13.0+cpu: relu and log1p kernels are miscompiled on purpose; the result differs from eager
"""

import torch
import torch._inductor.config

torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
torch._inductor.config.cpp.inject_log1p_bug_TESTING_ONLY = "accuracy"


def inner(x):
    y = torch.log1p(x)
    b = y > 0
    # Need to ensure suffix removal hits a boolean output
    b = torch.logical_not(b)
    b = torch.logical_not(b)
    x = torch.relu(x)
    return torch.where(b, x, x)


x = torch.randn(20)
# The test relies on TORCHDYNAMO_REPRO_LEVEL=4 to notice the difference; a user script compares itself.
torch.testing.assert_close(torch.compile(inner)(x), inner(x))

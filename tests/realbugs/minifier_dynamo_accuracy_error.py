"""
issue: https://github.com/pytorch/pytorch/blob/main/test/dynamo/test_minifier.py (MinifierTests.test_after_dynamo_accuracy_error)
title: PyTorch minifier test: accuracy error after Dynamo (relu_accuracy_error_TESTING_ONLY)
kind: wrong_result
category: accuracy
stage: backend
culprit: torch.relu
fails_on: torch 2.13.0+cpu: the testing backend replaces relu with add(x, 1); the compiled result differs from eager
"""

import torch


def inner(x):
    for _ in range(10):
        x = torch.sin(x)
    x = torch.relu(x)
    for _ in range(10):
        x = torch.cos(x)
    return x


x = torch.randn(20, 20)
# The test relies on TORCHDYNAMO_REPRO_LEVEL=4 to notice the difference; a user script compares itself.
torch.testing.assert_close(torch.compile(inner, backend="relu_accuracy_error_TESTING_ONLY")(x), inner(x))

"""
issue: https://github.com/pytorch/pytorch/blob/main/test/dynamo/test_minifier.py (MinifierTests.test_after_dynamo_compile_error)
title: PyTorch minifier test: compile error after Dynamo (relu_compile_error_TESTING_ONLY)
kind: crash
category: backend_failure
stage: backend
culprit: torch.relu
fails_on: torch 2.13.0+cpu: BackendCompilerFailed: ReluCompileError raised by the testing backend for the relu node
"""

import torch


@torch.compile(backend="relu_compile_error_TESTING_ONLY")
def inner(x):
    for _ in range(10):
        x = torch.sin(x)
    x = torch.relu(x)
    for _ in range(10):
        x = torch.cos(x)
    return x


inner(torch.randn(20, 20))

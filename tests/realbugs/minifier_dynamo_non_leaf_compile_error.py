"""
issue: https://github.com/pytorch/pytorch/blob/main/test/dynamo/test_minifier.py (MinifierTests.test_after_dynamo_non_leaf_compile_error)
title: PyTorch minifier test: compile error after Dynamo on a non-leaf input (non_leaf_compile_error_TESTING_ONLY)
kind: crash
category: backend_failure
stage: backend
culprit: non-leaf input tensor (requires_grad, not a leaf)
fails_on: torch 2.13.0+cpu: BackendCompilerFailed: TestingOnlyCompileError raised because an input is a non-leaf tensor
"""

import torch


@torch.compile(backend="non_leaf_compile_error_TESTING_ONLY")
def inner(x):
    return x + 1


inner(torch.randn(20, 20, requires_grad=True) + 1)

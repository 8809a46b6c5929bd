"""
issue: https://github.com/pytorch/pytorch/blob/main/test/inductor/test_minifier.py (MinifierTests.test_after_aot_cpu_compile_error)
title: PyTorch minifier test: C++ compile error after AOT (cpp.inject_relu_bug_TESTING_ONLY = "compile_error")
kind: crash
category: kernel_failure
stage: inductor
culprit: aten.relu
fails_on: torch 2.13.0+cpu: InductorError: CppCompileError from the relu kernel
"""

import torch
import torch._inductor.config

torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "compile_error"


@torch.compile()
def inner(x):
    x = torch.relu(x)
    x = torch.cos(x)
    return x


inner(torch.randn(20, 20).to("cpu"))

"""
issue: https://github.com/pytorch/pytorch/issues/188213
title: [inductor] `LoweringException: AssertionError` in `scatter_reduce_` lowering
kind: crash
category: backend_failure
stage: inductor
culprit: aten.scatter, aten.adaptive_max_pool2d
fails_on: torch 2.13.0+cpu: InductorError: LoweringException: AssertionError while lowering aten.scatter
"""

import torch
_m_t7785 = torch.nn.AdaptiveMaxPool1d((0,), return_indices=False).eval()
torch.manual_seed(0)
t7782 = torch.rand([4, 8], dtype=torch.float32)
def model_828():
    t7784 = torch.special.ndtri(t7782)
    t7785 = _m_t7785(t7784)
    t7787 = torch.scatter(t7785, -1, t7785, t7785)
    t7788 = torch.nn.functional.hardswish(t7787, inplace=False)
    return t7788
print(model_828())
compiled = torch.compile(model_828, backend="inductor")
with torch.no_grad():
    print(compiled())

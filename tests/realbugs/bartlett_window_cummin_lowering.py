"""
issue: https://github.com/pytorch/pytorch/issues/188224
title: [inductor] `LoweringException: AssertionError` in `_validate_dim` lowering
kind: crash
category: backend_failure
stage: inductor
culprit: aten.cummin, aten.bartlett_window
fails_on: torch 2.13.0+cpu: InductorError: LoweringException: AssertionError in _validate_dim while lowering aten.cummin
"""

import torch
def model_163():
    t31425 = torch.bartlett_window(0, periodic=False, requires_grad=False)
    t31426 = torch.clone(t31425)
    t31437 = torch.cummin(t31426, -46)[0]
    return t31437
print(model_163())
compiled = torch.compile(model_163, backend="inductor")
with torch.no_grad():
    print(compiled())

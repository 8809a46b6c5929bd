"""
issue: https://github.com/pytorch/pytorch/issues/188217
title: [inductor] `TypeError: reduce() of empty iterable with no initial value` during lowering
kind: crash
category: backend_failure
stage: inductor
culprit: aten.fractional_max_pool2d (kernel_size -2: its unrolled window reduction has an empty range)
fails_on: torch 2.13.0+cpu: InductorError: TypeError: reduce() of empty iterable with no initial value
"""

import torch, torch.nn as nn, torch.nn.functional as F

_m_t29101 = torch.nn.FractionalMaxPool2d(-2, output_size=(2, 2), return_indices=True).eval()
_m_t29102 = torch.nn.LocalResponseNorm(2, alpha=0.028131227420023146).eval()
_m_t29106 = torch.nn.Hardsigmoid(inplace=True).eval()

torch.manual_seed(0)
t29100 = torch.rand([1, 3, 32, 32], dtype=torch.float64)

def model_116():
    t29101 = _m_t29101(t29100)[0]
    t29102 = _m_t29102(t29101)
    t29104 = torch.nn.functional.logsigmoid(t29102)
    t29106 = _m_t29106(t29104)
    return t29106

# eager baseline -- succeeds
eager_out = model_116()
print("eager OK:", type(eager_out))

# inductor compile -- crashes
compiled = torch.compile(model_116, backend="inductor")
with torch.no_grad():
    compiled_out = compiled()
print("compiled OK:", type(compiled_out))

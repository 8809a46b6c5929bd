"""
issue: https://github.com/pytorch/pytorch/issues/188225
title: [inductor] `index_propagation` `ValueError: The argument 'nan' is not comparable`
kind: crash
category: backend_failure
stage: inductor
culprit: aten._softmax (its max over a constant NaN, from aten.acosh of a negative constant, reaches Inductor's index_propagation as a sympy nan)
fails_on: torch 2.13.0+cpu: InductorError: ValueError: The argument 'nan' is not comparable; torch 2.14.1 (CPU): passes
"""

import torch

_m_t2812 = torch.nn.Softmax().eval()


def model_1545():
    t2802 = torch.ones([2, 2])
    t2803 = torch.atan2(t2802, t2802)
    t2804 = torch.log2(t2803)
    t2805 = torch.arccosh(t2804)
    t2812 = _m_t2812(t2805)
    return t2812


eager_out = model_1545()
print("eager OK:", type(eager_out))
compiled = torch.compile(model_1545, backend="inductor")
with torch.no_grad():
    compiled_out = compiled()
print("compiled OK:", type(compiled_out))

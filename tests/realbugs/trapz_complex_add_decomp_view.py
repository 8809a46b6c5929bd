"""
issue: https://github.com/pytorch/pytorch/issues/190274
title: [inductor] RuntimeError: self.stride(0) must be divisible by 2 to view Double as ComplexDouble
kind: crash
category: backend_failure
stage: decomp_partition
culprit: aten.add on complex128 (Inductor's complex add decomposition views a non-contiguous float64 result as complex), inside aten.trapz
fails_on: torch 2.13.0+cpu: BackendCompilerFailed: RuntimeError: self.stride(0) must be divisible by 2 to view Double as ComplexDouble; torch 2.14.1 (CPU): same
"""

import torch

_m_t4011 = torch.nn.ReflectionPad1d(-1).eval()

torch.manual_seed(0)
t4010 = torch.randn([3, 3], dtype=torch.complex128)


def model_2450():
    t4011 = _m_t4011(t4010)
    t4012 = torch.trapz(t4011, t4011)
    return t4012


eager_out = model_2450()
print("eager OK:", type(eager_out))
compiled = torch.compile(model_2450, backend="inductor")
with torch.no_grad():
    compiled_out = compiled()
torch.testing.assert_close(compiled_out, eager_out)

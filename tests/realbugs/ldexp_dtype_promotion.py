"""
issue: https://github.com/pytorch/pytorch/issues/197091
title: [inductor] `torch.ldexp` output dtype differs from eager in both directions (int/bool × half → float32; half × float32 → half)
kind: wrong_result
category: accuracy
stage: inductor
culprit: aten.ldexp (Inductor's lowering picks the output dtype from the mantissa, not by type promotion)
fails_on: torch 2.13.0+cpu: compiled dtypes float32, float32, float16 where eager gives float16, bfloat16, float32; torch 2.14.1 (CPU): same
"""

import torch

torch.manual_seed(0)
cases = {
    "bool  x fp16": (torch.ones(3, 4, dtype=torch.bool), torch.randn(3, 4).half()),
    "int64 x bf16": (torch.randint(1, 4, (3, 4)), torch.randn(3, 4).bfloat16()),
    "fp16  x fp32": (torch.randn(3, 4).half(), torch.randn(3, 4)),
}
bad = []
for name, (m, e) in cases.items():
    eager = torch.ldexp(m, e)
    compiled = torch.compile(torch.ldexp)(m, e)
    print(name, eager.dtype, compiled.dtype)
    if eager.dtype != compiled.dtype:
        bad.append(name)
assert not bad, f"dtype differs for {bad}"

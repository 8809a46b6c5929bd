"""
issue: https://github.com/pytorch/pytorch/issues/181568
title: torch.compile mismatch for matmul followed by bfloat16 cast and fp32 add
kind: wrong_result
category: accuracy
stage: inductor
culprit: aten._to_copy (fp32 -> bf16 cast before aten.add elided by fusion), aten.mm
fails_on: torch 2.13.0+cpu: 507/510 output elements differ from eager (max abs diff ~0.03)
workaround: torch._inductor.config.emulate_precision_casts = True (named in the thread: PT2 Repro Agent comment, TORCHINDUCTOR_EMULATE_PRECISION_CASTS=1 brings the diff to 0; checked: the script passes with it on torch 2.13.0+cpu)
"""

import torch

torch.manual_seed(119)


def f(x, w, b):
    y = (x @ w).to(torch.bfloat16) + b
    return y, y.mean(-1)


x = torch.randn(2, 15, 32)
w = torch.randn(32, 17)
b = torch.randn(17)

ref = f(x, w, b)
got = torch.compile(
    f,
    backend="inductor",
    fullgraph=True,
    dynamic=True,
)(x, w, b)

for name, r, g in zip(["out", "mean"], ref, got):
    diff = (r.float() - g.float()).abs()
    print(
        name,
        "max_abs_diff =", diff.max().item(),
        "mean_abs_diff =", diff.mean().item(),
        "diff_count =", int((diff != 0).sum()),
        "numel =", r.numel(),
    )
    torch.testing.assert_close(r, g)

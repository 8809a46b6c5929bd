"""A kernel that makes NaN from finite inputs only when compiled (planted; CPU, or CUDA with `cuda` as argv[1]).

In float16, `x * x` for x = 1e-4 is 1e-8, below float16's smallest subnormal: eager rounds each op's
result to float16, so the product is 0 and `sqrt(-0.0)` is -0.0. Inductor's fused kernel keeps the
intermediates in float32 (`emulate_precision_casts` is off by default), so it takes the square root of
-1e-8: NaN. The script's own check says the result has NaN.
"""

import sys

import torch

device = sys.argv[1] if len(sys.argv) > 1 else "cpu"


def f(x):
    y = torch.sqrt(-(x * x))
    return y + 1


x = torch.full((64,), 1e-4, dtype=torch.float16, device=device)
out = torch.compile(f)(x)
print("eager has NaN:", bool(f(x).isnan().any()))
assert not out.isnan().any(), "NaN in the compiled result"

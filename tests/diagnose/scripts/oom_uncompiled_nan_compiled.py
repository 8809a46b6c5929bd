"""The program cannot run without the compiler (planted): uncompiled it runs out of memory, compiled it
makes NaN.

`torch.zeros(1_000_000, 1_000_000)` is 4 TB: eager (and every backend that runs the graph's ops one by
one: eager, aot_eager) fails to allocate it. Inductor never materializes it: only the 64 elements read
from it are computed, inside the fused kernel. The compiled program then fails for what it computes: its
float16 kernel makes NaN where eager rounding would not (`nan_only_compiled.py`).
"""

import torch


def f(x):
    big = torch.zeros(1_000_000, 1_000_000, dtype=x.dtype, device=x.device)
    return torch.sqrt(-(x * x)) + big[0, : x.numel()]


x = torch.full((64,), 1e-4, dtype=torch.float16)
out = torch.compile(f)(x)
assert not out.isnan().any(), "NaN in the compiled result"

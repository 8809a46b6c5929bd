"""An illegal memory access in a Triton kernel (planted; needs a CUDA device).

With Inductor's bounds check on indirect indices turned off (`assert_indirect_indexing = False`), the gather
`x[i]`, fused with the pointwise ops around it, reads wherever its index points: 2**40 elements past a tensor
of 10 is an address no allocation holds, an illegal memory access. Eager checks the range (a device-side
assert): a user error either way, but compiled, the fault is one only compute-sanitizer can place.
"""

import torch

torch._inductor.config.assert_indirect_indexing = False


def f(x, i):
    return torch.relu(x[i]) * 2 + 1


x = torch.randn(10, device="cuda")
i = torch.tensor([0, 5, 2**40], device="cuda")
out = torch.compile(f)(x, i)
print(out.sum().item())

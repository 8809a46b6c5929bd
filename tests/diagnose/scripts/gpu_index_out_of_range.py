"""An index out of range in a Triton kernel: a device-side assert (planted; needs a CUDA device).

The gather `x[i]` is fused with the pointwise ops around it into one Triton kernel, which asserts its
indirect index is in range (`tl.device_assert`): 12 is not, for a dimension of size 10.
"""

import torch


def f(x, i):
    return torch.relu(x[i]) * 2 + 1


x = torch.randn(10, device="cuda")
i = torch.tensor([0, 5, 12], device="cuda")
out = torch.compile(f)(x, i)
print(out.sum().item())

"""`.item()` feeds a Python `if`: `capture_scalar_outputs` moves the break but does not remove it."""
import torch


def pick(x):
    if x.sum().item() > 0:
        return x + 1
    return x - 1


compiled = torch.compile(pick, backend="eager")
for _ in range(3):
    compiled(torch.randn(16))

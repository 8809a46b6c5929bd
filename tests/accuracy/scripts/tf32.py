"""A float32 matmul with TF32 allowed (on a GPU: 10-bit mantissa products): reduced precision, called out.

On CPU the flag changes nothing numerically; the call-out is what is checked there."""
import torch

torch.backends.cuda.matmul.allow_tf32 = True
torch.set_float32_matmul_precision("high")
device = "cuda" if torch.cuda.is_available() else "cpu"


def f(a, b):
    return torch.relu(a @ b) + 1


torch.manual_seed(0)
a, b = torch.randn(256, 256, device=device), torch.randn(256, 256, device=device)
print(torch.compile(f)(a, b).sum().item())

"""Integer outputs that Inductor (CPU, torch 2.13) gets wrong: the minimum of 16+ uint8 values is 0
(pytorch/pytorch#191499), and an int8 batched matmul returns int64 (pytorch/pytorch#191308)."""
import torch


@torch.compile(backend="inductor")
def smallest(x):
    return torch.min(x)


@torch.compile(backend="inductor")
def products(a, b):
    return torch.matmul(a, b)


values = torch.tensor([5, 1, 100, 3, 7, 8, 9, 13, 100, 120, 127, 2, 6, 4, 11, 12, 90, 80], dtype=torch.uint8)
print("min", smallest(values).item())
out = products(torch.ones((1, 1, 2), dtype=torch.int8), torch.ones((1, 2, 2), dtype=torch.int8))
print("matmul", out.tolist(), out.dtype)

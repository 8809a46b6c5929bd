"""A compiled function that updates its inputs in place: a strided int64 view (a storage offset) and
a float64 view. A check that ran the graph on the program's own tensors would change what it prints."""
import torch


@torch.compile(backend="inductor")
def bump_(counts, weights):
    counts.add_(1)
    weights.mul_(2)
    return counts.sum() + weights.sum()


counts = torch.arange(12).reshape(3, 4)
weights = torch.arange(12, dtype=torch.float64).reshape(3, 4)
total = bump_(counts[:, 1:3], weights[:, 1:3])
print(total.item(), counts.tolist(), weights.tolist())

"""The troubleshooting guide's toy example: a print() and a data-dependent branch break the graph."""
import torch


def toy_example(a, b):
    x = a / (torch.abs(a) + 1)
    print("woo")
    if b.sum() < 0:
        b = b * -1
    return x * b


torch.manual_seed(0)  # seeded: every run takes the branch both ways (four graphs), and two runs compare equal
compiled = torch.compile(toy_example, backend="eager")
for _ in range(3):
    compiled(torch.randn(10), torch.randn(10))

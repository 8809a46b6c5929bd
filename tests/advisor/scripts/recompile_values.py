"""Recompiles whose fix depends on the value's type and origin: an nn.Module int attribute (with torch's
HINT), a string mode, a float, a number carried across a graph break, grad mode."""
import torch


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * self.calls


class Moded(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mode = "a"

    def forward(self, x):
        return x + 1 if self.mode == "a" else x - 1


def by_float(x, t):
    return x / t


def by_carried(x):
    n = int(x.sum().item())
    return x * n


def by_grad_mode(x, w):
    return x @ w


x = torch.ones(4)
counter = torch.compile(Counter(), backend="eager")
for _ in range(3):
    counter(x)
moded = Moded()
compiled_moded = torch.compile(moded, backend="eager")
compiled_moded(x)
moded.mode = "b"
compiled_moded(x)
for t in (1.0, 0.5):
    torch.compile(by_float, backend="eager")(x, t)
for scale in (1.0, 2.0):
    torch.compile(by_carried, backend="eager")(x * scale)
w = torch.randn(4, 4, requires_grad=True)
torch.compile(by_grad_mode, backend="eager")(x, w)
with torch.no_grad():
    torch.compile(by_grad_mode, backend="eager")(x, w)

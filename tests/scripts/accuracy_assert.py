import torch


def f(x):
    return x * 2


out = torch.compile(f, backend="eager")(torch.ones(3))
torch.testing.assert_close(out, torch.ones(3))

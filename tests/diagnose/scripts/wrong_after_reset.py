"""A backend that adds 1 to every output, used before and after `torch._dynamo.reset()`: both graphs are
wrong and both have torch's compile id 0/0 (the reset restarts Dynamo's counters); the program checks only
the second one's result."""
import torch


def off_by_one(gm, example_inputs):
    def compiled(*args):
        return tuple(out + 1 for out in gm(*args))

    return compiled


def f(x):
    return torch.cos(x) * 2


x = torch.randn(8)
print("first", torch.compile(f, backend=off_by_one)(x).sum().item())
torch._dynamo.reset()
second = torch.compile(f, backend=off_by_one)(x)
torch.testing.assert_close(second, torch.cos(x) * 2)

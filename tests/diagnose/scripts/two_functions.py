"""Two compiled functions: `bad` fails in its custom backend, `good` compiles fine."""
import torch


def refusing_backend(gm, example_inputs):
    raise RuntimeError("refusing_backend refuses every graph")


def good(x):
    return torch.sin(x) + 1


def bad(x):
    return torch.cos(x) * 2


torch.compile(good, backend="eager")(torch.randn(4))
torch.compile(bad, backend=refusing_backend)(torch.randn(4))

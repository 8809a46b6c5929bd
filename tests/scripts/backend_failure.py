import torch


def my_backend(gm, example_inputs):
    raise RuntimeError("my_backend refuses this graph")


torch.compile(lambda x: torch.sin(x) + 1, backend=my_backend)(torch.randn(3))

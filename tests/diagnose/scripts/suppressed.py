import torch

torch._dynamo.config.suppress_errors = True  # a failing compile runs eagerly instead of raising


def my_backend(gm, example_inputs):
    if any(node.target is torch.cos for node in gm.graph.nodes):
        raise RuntimeError("my_backend: cos is unsupported")
    return gm.forward


print(torch.compile(lambda x: torch.cos(x) * 3, backend=my_backend)(torch.randn(5)))

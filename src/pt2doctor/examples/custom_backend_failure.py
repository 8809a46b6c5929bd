"""The guide's custom-backend example: a backend that fails whenever the graph holds a relu."""
import torch


def toy_compiler(gm: torch.fx.GraphModule, example_inputs):
    for node in gm.graph.nodes:
        if node.target in (torch.relu, torch.nn.functional.relu):
            raise ValueError("toy_compiler cannot handle relu")
    return gm.forward


def model(x):
    x = torch.cos(x) + 1
    x = torch.relu(x)
    return x * 2


torch.compile(model, backend=toy_compiler)(torch.randn(16))

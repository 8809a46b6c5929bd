"""A CUDA program that holds 55% of the GPU's memory and whose custom backend cannot compile sigmoid: two
copies of it at once would run out of memory, which is not its bug."""
import torch

free, total = torch.cuda.mem_get_info()
held = torch.empty(int(0.55 * total), dtype=torch.uint8, device="cuda")


def picky_backend(gm, example_inputs):
    for node in gm.graph.nodes:
        if node.target in (torch.sigmoid, torch.Tensor.sigmoid):
            raise NotImplementedError("picky_backend cannot compile sigmoid")
    return gm.forward


def f(x):
    return torch.sigmoid(torch.cos(x) + 1) * 3


print(torch.compile(f, backend=picky_backend)(torch.randn(8, device="cuda")).sum().item())

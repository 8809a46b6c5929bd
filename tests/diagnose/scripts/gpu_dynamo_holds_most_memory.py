"""A CUDA program that holds 55% of the GPU's memory and meets a (planted) Dynamo bug: the program is reduced,
and two runs of it at once (the reduced program's verification runs side by side) would run out of memory,
which is not its bug."""
import torch

import dynamo_bug_plant

free, total = torch.cuda.mem_get_info()
held = torch.empty(int(0.55 * total), dtype=torch.uint8, device="cuda")


def f(x):
    return dynamo_bug_plant.scale(torch.cos(x)) * max(x.shape[0], 2)


print(torch.compile(f, dynamic=True)(torch.randn(4, device="cuda")).sum().item())

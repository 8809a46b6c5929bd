"""A dynamic_shapes range the program does not support: the branch on x.shape[0] needs b >= 5."""
import torch
from torch.export import Dim


class Model(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 4:
            return x + 1
        return x[:3] * 2


b = Dim("b", min=2, max=64)
ep = torch.export.export(Model(), (torch.ones(8, 3),), dynamic_shapes={"x": {0: b}})
print(ep.module()(torch.ones(6, 3)).sum())

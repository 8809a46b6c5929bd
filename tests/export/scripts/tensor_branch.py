"""Non-strict export of a branch on a tensor: no torch._check fixes it (torch.cond would)."""
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x + 1
        return x - 1


ep = torch.export.export(Model(), (torch.ones(3),))
print(ep.module()(torch.ones(3)), ep.module()(-torch.ones(3)))

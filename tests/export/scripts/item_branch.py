"""Non-strict export of a branch on a value read with .item(): a data-dependent guard at line 10."""
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        total = x.sum().item()
        # a branch on a value torch.export cannot know while tracing
        y = x * 2
        if total > 2:
            return y + 1
        return y


x = torch.ones(4, dtype=torch.int64)
ep = torch.export.export(Model(), (x,))
print(ep.module()(x))

"""The module exported raises when called eagerly with its inputs (a shape error in forward)."""
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x @ x


ep = torch.export.export(Model(), (torch.randn(2, 3),))

"""A graph break inside forward: strict export (Dynamo) fails, non-strict export traces it."""
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        y = x.sin()
        torch._dynamo.graph_break()
        return y.cos()


x = torch.randn(3)
ep = torch.export.export(Model(), (x,), strict=True)
ep = ep.run_decompositions()
print(ep.module()(x))

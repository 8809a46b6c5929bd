"""
issue: https://github.com/pytorch/pytorch/issues/171964
title: `torch.export.export` on unflattened module fails for dynamic shapes
kind: crash
category: dynamo_internal
stage: dynamo
culprit: re-exporting a torch.export.unflatten UnflattenedModule with dynamic_shapes (its forward takes *args, so the spec no longer matches)
fails_on: torch 2.13.0+cpu: UserError: Detected mismatch between the structure of `inputs` and `dynamic_shapes`: `inputs[0]` is a <class 'tuple'>, but `dynamic_shapes[0]` is a <class 'dict'>
"""

import torch

class AdapterBase(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.adapter = torch.nn.Linear(2, 2)
        self.act = torch.nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.adapter(x))


class Main(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.base = AdapterBase()

    def forward(self, x: torch.Tensor):
        return self.base(x)


model = Main().eval()
x = torch.rand(2, 2)
program = torch.export.export(model, args=(x,), dynamic_shapes=({0: torch.export.Dim.DYNAMIC(min=1, max=1024)},))
unflattened_module = torch.export.unflatten(program)
program = torch.export.export(unflattened_module, args=(x,), dynamic_shapes=({0: torch.export.Dim.DYNAMIC(min=1, max=1024)},))
print("ok")

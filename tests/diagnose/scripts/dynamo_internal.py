"""A Dynamo-internal failure (planted by `dynamo_bug_plant`): it fails with backend='eager' too."""
import torch

import dynamo_bug_plant


def f(x):
    return dynamo_bug_plant.scale(torch.cos(x)) * max(x.shape[0], 2)


print(torch.compile(f, dynamic=True)(torch.randn(4)))

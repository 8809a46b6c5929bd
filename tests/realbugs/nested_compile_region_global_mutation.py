"""
issue: https://github.com/pytorch/pytorch/issues/191821
title: [nested compile region] silently incorrect result on global mutation
kind: wrong_result
category: accuracy
stage: dynamo
culprit: torch.compiler.nested_compile_region (invoke_subgraph) reading a reassigned global
fails_on: torch 2.13.0+cpu: compiled returns 1, eager 2, backend=eager
"""

from dataclasses import dataclass
import torch
@dataclass
class RegionInput:
    hidden: torch.Tensor
region_input = RegionInput(torch.tensor(0))
@torch.compiler.nested_compile_region
def region():
    return region_input.hidden + 1
def fn(hidden):
    global region_input
    for _ in range(2):
        region_input = RegionInput(hidden)
        hidden = region()
    return hidden
hidden = torch.tensor(0)
expected = fn(hidden)
actual = torch.compile(fn, backend="eager", fullgraph=True)(hidden)
print(expected, actual); torch.testing.assert_close(actual, expected)

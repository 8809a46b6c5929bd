"""
issue: https://github.com/pytorch/pytorch/issues/197859
title: [dynamo] torch.compile misses nn.Module __dict__ shadowing and returns stale results
kind: wrong_result
category: accuracy
stage: dynamo
culprit: guard on nn.Module instance __dict__ shadowing a submodule
fails_on: torch 2.13.0+cpu: the compiled module keeps using the old submodule after object.__setattr__
"""

import torch
import torch.nn as nn
class Wrapper(nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = nn.Linear(4, 4, bias=False)
        with torch.no_grad():
            self.sub.weight.copy_(torch.eye(4))
    def forward(self, x):
        return self.sub(x)
model = Wrapper(); x = torch.arange(4.0)
compiled = torch.compile(model)
print(compiled(x))
replacement = nn.Linear(4, 4, bias=False)
with torch.no_grad():
    replacement.weight.fill_(5.0)
object.__setattr__(model, "sub", replacement)
e = model(x); c = compiled(x); print(e, c)
torch.testing.assert_close(c, e)

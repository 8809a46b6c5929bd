"""
issue: https://github.com/pytorch/pytorch/issues/189801
title: inductor rounds slightly negative F.elu outputs to exactly 0.0, causing div-by-zero to produce nan instead of -inf
kind: wrong_result
category: accuracy
stage: inductor
culprit: aten.elu (a subnormal negative output becomes 0.0), then aten.div by zero
fails_on: torch 2.13.0+cpu: compiled gives nan where eager gives -inf
"""

import torch
import torch.nn.functional as F

class BugModule(torch.nn.Module):
    def forward(self, x):
        return torch.div(F.elu(x, alpha=0.52), torch.zeros_like(x))

x = torch.tensor([-1e-8, -1e-9, -1e-10, -1e-20, -1e-30, -1e-38],
                  dtype=torch.float32)

model = BugModule()

with torch.no_grad():
    ref = model(x)  # eager reference

compiled_ind = torch.compile(model, backend="inductor")
with torch.no_grad():
    cmp_ind = compiled_ind(x)

print("eager:   ", ref)
print("inductor:", cmp_ind)
torch.testing.assert_close(cmp_ind, ref)

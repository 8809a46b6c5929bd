"""Dropouts under a user backend with the planted softmax bug of `sloppy_backend`. `eval` (argv):
`nn.Dropout` in eval mode and `F.dropout(p=0.0)` draw nothing, so the graph has no random ops.
`train`: the nn.Dropout draws, but fallback_random is Inductor's config, so nothing re-runs with it."""
import sys

import torch
from sloppy_backend import round_softmax_through_bf16


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(32, 32)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        h = torch.softmax(self.fc(x), dim=-1)
        return self.drop(h) + torch.nn.functional.dropout(h, p=0.0)


torch.manual_seed(0)
model = Net().train(sys.argv[1] == "train")
with torch.no_grad():
    print(torch.compile(model, backend=round_softmax_through_bf16)(torch.randn(16, 32)).sum().item())

"""One program, two Dynamo configs: `python config_change.py changed` turns off capture_scalar_outputs
(so `.item()` breaks the graph) and automatic dynamic shapes (so each new length recompiles)."""
import sys

import torch

changed = sys.argv[1:] == ["changed"]
torch._dynamo.config.capture_scalar_outputs = not changed
torch._dynamo.config.automatic_dynamic_shapes = not changed


@torch.compile(backend="eager")
def scale(x):
    return x * x.sum().item()


for n in (4, 5, 6):
    scale(torch.ones(n))
print("done")

"""torch.compile only: nothing for the export observer to record."""
import torch

print(torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2)))

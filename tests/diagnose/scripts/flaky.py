"""Fails in exactly one of two runs: the first run to claim the marker file fails."""
import os
import sys

import torch

marker = os.path.join(sys.argv[1], "claimed")
out = torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2))
try:
    os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
except FileExistsError:
    print("second run passes")
else:
    raise RuntimeError("first run fails")

"""A custom backend that never returns: the compiled run hangs, eager does not."""
import time

import torch


def stuck_backend(gm, example_inputs):
    while True:
        time.sleep(0.1)


torch.compile(lambda x: torch.sin(x) + 1, backend=stuck_backend)(torch.randn(4))

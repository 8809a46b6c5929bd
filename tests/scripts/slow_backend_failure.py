import time

import torch


def slow_backend(gm, example_inputs):
    time.sleep(4)  # every minifier query waits too: a Ctrl-C lands while the minifier works
    raise RuntimeError("slow_backend refuses this graph")


torch.compile(lambda x: torch.sin(x) + 1, backend=slow_backend)(torch.randn(3))

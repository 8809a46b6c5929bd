import threading

import torch

_lock = threading.Lock()


def helper(x):
    with _lock:  # a break Dynamo cannot resume from: it skips this frame and runs it eagerly
        return x * 2


@torch.compile(backend="eager")
def f(x):
    return helper(x.sin()) + 1


f(torch.ones(3))

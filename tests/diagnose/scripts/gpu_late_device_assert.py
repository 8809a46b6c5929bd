"""A device-side assert that CUDA reports after the compiled graph returned (needs a CUDA device).

The backend runs the graph, then launches a gather with an index out of range: CUDA raises the
assert at the script's next synchronizing call (`.item()`), not inside the compiled call.
"""

import torch


def late_assert_backend(gm, example_inputs):
    def run(*args):
        out = gm(*args)
        bad = torch.full((1,), 10**6, device=args[0].device, dtype=torch.long)
        torch.index_select(args[0].flatten(), 0, bad)
        return out

    return run


@torch.compile(backend=late_assert_backend)
def f(x):
    return torch.relu(x) * 2


y = f(torch.randn(64, device="cuda"))
print("sum", y.sum().item())

"""One function per cookbook graph-break cause."""
import torch


def uses_print(x):
    print("step")
    return x + 1


def uses_item(x):
    y = x.sum().item()
    return x * y


def uses_branch(x):
    if x.sum() > 0:
        return x + 1
    return x - 1


def uses_nonzero(x):
    return x.nonzero() + 1


def uses_tolist(x):
    return x * len([v for v in x.tolist() if v > 0])


@torch.compiler.disable
def eager_only(x):
    return x * 3


def uses_disabled(x):
    return eager_only(x + 1) + 1


x = torch.randn(8)
for fn in (uses_print, uses_item, uses_branch, uses_nonzero, uses_tolist, uses_disabled):
    compiled = torch.compile(fn, backend="eager")
    compiled(x)
    compiled(x)

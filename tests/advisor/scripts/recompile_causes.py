"""One function per recompile cause (size, dtype, stride, requires_grad, scalar, global), one limit hit."""
from types import SimpleNamespace

import torch

CONFIG = SimpleNamespace(flag=True)


def by_size(x):
    return x.sin()


def by_dtype(x):
    return x.cos()


def by_stride(x):
    return x + 1


def by_grad(x):
    return x * 2


def by_scalar(x, n):
    return x * n


def by_global(x):
    return x + 1 if CONFIG.flag else x - 1


def by_limit(x):
    return x.tanh()


torch.compile(by_size, backend="eager")(torch.randn(16))
torch.compile(by_size, backend="eager")(torch.randn(17))
torch.compile(by_dtype, backend="eager")(torch.randn(4))
torch.compile(by_dtype, backend="eager")(torch.randn(4, dtype=torch.float16))
square = torch.randn(4, 4)
torch.compile(by_stride, backend="eager")(square)
torch.compile(by_stride, backend="eager")(square.t())
torch.compile(by_grad, backend="eager")(torch.randn(4))
torch.compile(by_grad, backend="eager")(torch.randn(4, requires_grad=True))
torch.compile(by_scalar, backend="eager")(torch.randn(4), 3)
torch.compile(by_scalar, backend="eager")(torch.randn(4), 4)
torch.compile(by_global, backend="eager")(torch.randn(4))
CONFIG.flag = False
torch.compile(by_global, backend="eager")(torch.randn(4))
torch._dynamo.config.recompile_limit = 2
limited = torch.compile(by_limit, backend="eager", dynamic=False)
for size in range(2, 7):
    limited(torch.randn(size))

import torch


# a module global: torch 2.11 does not guard a class attribute read here (a stale result)
FLAG = True


def size_fn(x):
    return x + 1


def dtype_fn(x):
    return x + 1


def stride_fn(x):
    return x + 1


def grad_fn(x):
    return x + 1


def value_fn(x, n):
    return x * n


def global_fn(x):
    if FLAG:
        return x + 1
    return x - 1


def c(fn):
    return torch.compile(fn, backend="eager", dynamic=False)


s = c(size_fn); s(torch.randn(4)); s(torch.randn(5))
d = c(dtype_fn); d(torch.randn(4)); d(torch.randn(4, dtype=torch.float64))
st = c(stride_fn); st(torch.randn(4, 4)); st(torch.randn(4, 4).t())
g = c(grad_fn); g(torch.randn(4)); g(torch.randn(4, requires_grad=True))
v = c(value_fn); v(torch.randn(4), 3); v(torch.randn(4), 4)
gl = c(global_fn); gl(torch.randn(4)); FLAG = False; gl(torch.randn(4))

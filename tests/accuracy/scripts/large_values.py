"""A user backend that computes a wrong result only on values the minifier's random inputs never
have: a float input above 50 in magnitude (random floats are `randn`) together with an index above
zero (random indices are zeros). Only the values the run saw reproduce it."""
import torch


def on_large_values(gm, example_inputs):
    def run(*args):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        large = any(a.is_floating_point() and bool((a.abs() > 50).any()) for a in tensors)
        indexed = any(not a.is_floating_point() and bool((a > 0).any()) for a in tensors)
        out = gm(*args)
        return tuple(o + 1 for o in out) if large and indexed else out

    return run


def f(x, idx):
    y = torch.sin(x) * 2
    return (torch.cos(y[idx]) + x[idx],)


x = torch.linspace(-100.0, 100.0, 24).reshape(6, 4)
print(torch.compile(f, backend=on_large_values)(x, torch.tensor([3, 1, 0]))[0].sum().item())

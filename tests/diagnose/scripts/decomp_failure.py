"""Planted decomposition failure: the script registers a broken decomposition for sigmoid in Inductor's
table, which `aot_eager_decomp_partition` and Inductor use and `aot_eager` does not."""
import torch
from torch._inductor.decomposition import decompositions


def broken_sigmoid(x):
    raise RuntimeError("planted decomposition bug: sigmoid")


decompositions[torch.ops.aten.sigmoid.default] = broken_sigmoid


def f(x):
    return torch.sin(torch.sigmoid(torch.cos(x))) + 1


torch.compile(f)(torch.randn(8))

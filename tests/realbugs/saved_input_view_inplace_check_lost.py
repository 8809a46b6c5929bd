"""
issue: https://github.com/pytorch/pytorch/issues/197887
title: [inductor] Autograd's "modified by an inplace operation" check is lost when a view of a graph input is saved for backward: `x @ w`, `bmm`, `einsum`, 3-D `F.linear` silently return wrong gradients afte...
kind: wrong_result
category: accuracy
stage: inductor
culprit: aten.mm saving a view of the input x for backward; Inductor rebuilds it with reinterpret_tensor, which does not share x's version counter
fails_on: torch 2.13.0+cpu: eager backward raises "modified by an inplace operation" after x.add_(1); compiled backward silently uses the mutated x
"""

import torch

w = torch.randn(8, 3, requires_grad=True)

def f(x, w):
    return x @ w

x0 = torch.randn(2, 4, 8)

def run(fn):
    x = x0.clone(); w.grad = None
    y = fn(x, w)
    x.add_(1.0)                     # mutate the saved input between forward and backward
    try:
        y.sum().backward()
    except RuntimeError as e:
        return "raised: " + str(e)[:60]
    return "ok"

eager = run(f)
compiled = run(torch.compile(f))
print("eager:   ", eager)
print("compiled:", compiled)
assert eager == compiled

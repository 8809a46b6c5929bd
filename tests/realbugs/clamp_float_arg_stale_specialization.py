"""
issue: https://github.com/pytorch/pytorch/issues/194976
title: [torch.compile][Inductor] Silent wrong results when an automatically dynamic Python float used by clamp reuses a stale value
kind: wrong_result
category: accuracy
stage: inductor
culprit: aten.clamp_min, aten.clamp_max (the Python float `limit` becomes dynamic; tensorify_python_scalars burns its value into the graph with only a ShapeEnv guard, which AOTAutogradCache drops, so later calls reuse the stale constant)
fails_on: torch 2.13.0+cpu: after limit=0.5 and 1.0, limit=2.0 and 3.0 compute with a stale limit (forward max abs diff 3.0 and 8.0, input grad max abs diff 1.10 and 2.20)
workaround: torch._dynamo.config.specialize_float = True (named in the thread: the reporter tongke6, issue description of 2026-08-27, "The same reproducer is correct with: torch._dynamo.config.patch(specialize_float=True)"; checked: the script passes with it on torch 2.13.0+cpu)
"""

import torch
import torch.nn.functional as F

print(torch.__version__)


def eager_swiglu(x, limit):
    gate, up = torch.chunk(x, 2, dim=-1)
    gate = F.silu(gate).clamp(max=limit)
    up = up.clamp(min=-limit, max=limit)
    return gate * up


@torch.compile(backend="inductor")
def compiled_swiglu(x, limit):
    gate, up = torch.chunk(x, 2, dim=-1)
    gate = F.silu(gate).clamp(max=limit)
    up = up.clamp(min=-limit, max=limit)
    return gate * up


torch.manual_seed(0)
x0 = torch.randn(16, 64) * 4
bad = []
for limit in (0.5, 1.0, 2.0, 3.0):
    xe = x0.clone().requires_grad_()
    xc = x0.clone().requires_grad_()
    ref = eager_swiglu(xe, limit)
    out = compiled_swiglu(xc, limit)
    ref.sum().backward()
    out.sum().backward()
    d = (ref - out).abs().max().item()
    g = (xe.grad - xc.grad).abs().max().item()
    print(f"limit={limit}: forward max abs diff {d:.4f}, grad max abs diff {g:.4f}")
    if d > 1e-5 or g > 1e-5:
        bad.append(limit)
assert not bad, f"compiled result uses a stale clamp limit for limit(s) {bad}"

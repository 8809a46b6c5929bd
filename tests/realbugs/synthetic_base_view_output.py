"""
issue: https://github.com/pytorch/pytorch/issues/198095
title: [aot_autograd] Output that is a view of an aliased input (synthetic base) is regenerated from the wrong tensor: ta[0] returns t0[0], ta.view(-1) asserts on ViewMeta shape
kind: wrong_result
category: accuracy
stage: aot_autograd
culprit: aten.select on an input that aliases a mutated input (aten.add_), replayed on AOTAutograd's synthetic base
fails_on: torch 2.13.0+cpu: compiled returns t0[0] ([100, ..., 105]) instead of ta[0] == t0[1] ([106, ..., 111]) with aot_eager
"""

import torch

def fn(t0, ta):          # ta is a view of t0 with storage offset 6
    t0.add_(100)
    return ta[0]         # must be t0[1] after the mutation

base = torch.arange(24, dtype=torch.float64).reshape(4, 6)
e0 = base.clone(); eager = fn(e0, e0[1:])
c0 = base.clone(); compiled = torch.compile(fn, backend="aot_eager")(c0, c0[1:])
print("eager:   ", eager)
print("compiled:", compiled)
torch.testing.assert_close(compiled, eager)

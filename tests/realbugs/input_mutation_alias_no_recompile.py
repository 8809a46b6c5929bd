"""
issue: https://github.com/pytorch/pytorch/issues/139789
title: compiling "input mutation" followed by "input mutation + aliasing" does not properly recompile
kind: wrong_result
category: accuracy
stage: aot_autograd
culprit: aten.mul_ on an input that overlaps another input (no guard on input aliasing, so the non-aliased graph is reused)
fails_on: torch 2.13.0+cpu: the second call, with overlapping views, returns [3, 3, 3, 3] where eager returns [4, 4, 3, 3] (backend=aot_eager)
"""

import torch

def f(x, y):
    x.mul_(2)
    return x + y

x1 = torch.ones(4)
y1 = torch.ones(4)
f_compiled = torch.compile(f, backend="aot_eager")
out1 = f_compiled(x1, y1)

base = torch.ones(8)
x2 = base[:4]
y2 = base[2:6]
out2 = f_compiled(x2, y2)

base_ref = torch.ones(8)
out2_ref = f(base_ref[:4], base_ref[2:6])
print(out2_ref)
print(out2)
torch.testing.assert_close(out2, out2_ref)

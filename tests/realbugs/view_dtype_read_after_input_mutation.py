"""
issue: https://github.com/pytorch/pytorch/issues/198101
title: [inductor] Consumer of a dtype view of an input is computed after a later in-place mutation of that input (y = x.view(int32) * 2; y.sub_(-4); x[:, 2:5] = 2; return y.view(int64))
kind: wrong_result
category: accuracy
stage: inductor
culprit: aten.view.dtype of the input read after the input mutation aten.copy_ (x[:, 2:5] = 2)
fails_on: torch 2.13.0+cpu: compiled y is computed from x after the mutation (17179869192 where eager has 12884901872)
"""

import torch

def fn(x):
    y = x.view(torch.int32) * 2     # reads x (as int32 pairs) -> fresh tensor
    y.sub_(-4)                      # in-place update of the intermediate
    x[:, 2:5] = 2                   # mutate the input afterwards
    return y.view(torch.int64)      # must reflect x BEFORE the mutation

x = torch.arange(-12, 12, dtype=torch.int64).reshape(4, 6)
eager = fn(x.clone())
compiled = torch.compile(fn, backend="inductor")(x.clone())
print(eager.flatten().tolist()[:6])
print(compiled.flatten().tolist()[:6])
torch.testing.assert_close(compiled, eager)

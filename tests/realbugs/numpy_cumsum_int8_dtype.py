"""
issue: https://github.com/pytorch/pytorch/issues/198056
title: [dynamo][numpy] dtype and shape divergences of NumPy code under `torch.compile`: `np.cumsum(int8)` overflows in int8, `np.square(int8)` returns float64, `np.median` returns shape `(1,)`, `np.any` retu...
kind: wrong_result
category: accuracy
stage: dynamo
culprit: aten.cumsum (torch._numpy result dtype)
fails_on: torch 2.13.0+cpu: np.cumsum of an int8 array returns int8 (overflowed) instead of int64, backend=eager
"""

import numpy as np, torch
i8 = np.array([-128, -100, -3, 0, 5, 100, 127], dtype=np.int8)
def f(a): return np.cumsum(a)
e = f(i8); c = torch.compile(f, backend="eager")(i8)
print(e, e.dtype, c, c.dtype); assert np.array_equal(e, c) and e.dtype == c.dtype

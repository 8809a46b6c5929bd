"""
issue: https://github.com/pytorch/pytorch/issues/197860
title: [dynamo] torch.compile does not guard the code object of an inlined bound method
kind: wrong_result
category: accuracy
stage: dynamo
culprit: guard on a bound method's __code__
fails_on: torch 2.13.0+cpu: the compiled callable keeps the old method body after __code__ is replaced
"""

import torch
def first(self, x):
    return x * 2.0
def second(self, x):
    return x * 9.0
class Model:
    m = first
model = Model(); x = torch.arange(1.0, 4.0)
compiled = torch.compile(lambda x: model.m(x))
print(compiled(x))
Model.m.__code__ = second.__code__
e = model.m(x); c = compiled(x); print(e, c)
torch.testing.assert_close(c, e)

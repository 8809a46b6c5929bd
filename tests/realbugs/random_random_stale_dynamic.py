"""
issue: https://github.com/pytorch/pytorch/issues/196437
title: [dynamo] dynamic=True reuses a stale random.Random value after shape specialization
kind: wrong_result
category: accuracy
stage: dynamo
culprit: random.Random.randint on a persistent Random object under dynamic=True (a cached graph replays the previous value)
fails_on: torch 2.13.0+cpu: for shapes (1,), (1, 5), (2, 2), (2, 3) eager adds 50, 98, 54, 6; compiled adds 50, 98, 54, 54
"""

# The reproducer keeps one seeded random.Random across calls with this shape history.
import random
import torch

def f(x, rng):
    return x + rng.randint(1, 100)

shapes = [(1,), (1, 5), (2, 2), (2, 3)]
eager_rng, compiled_rng = random.Random(0), random.Random(0)
compiled = torch.compile(f, backend="eager", dynamic=True)
for shape in shapes:
    x = torch.zeros(shape)
    e = f(x, eager_rng); c = compiled(x, compiled_rng)
    print(shape, e.flatten()[0].item(), c.flatten()[0].item())
    torch.testing.assert_close(c, e)

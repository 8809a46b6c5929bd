"""
issue: https://github.com/pytorch/pytorch/issues/198190
title: [dynamo] A generator that leaves a compiled region (returned, or alive across a graph break) comes back as an exhausted `tuple_iterator`: `StopIteration.value` is silently `None`, `.send()` / `.throw(...
kind: wrong_result
category: accuracy
stage: dynamo
culprit: a generator object returned from the compiled frame: Dynamo reconstructs it as a tuple_iterator of its remaining yields (its return value is lost)
fails_on: torch 2.13.0+cpu: compiled returns a tuple_iterator whose StopIteration.value is None; eager a generator returning "done"
"""

import torch


def make(x):
    def gen():
        yield x * 1
        yield x * 2
        return "done"
    return gen()


def consume(it):
    out = [type(it).__name__]
    try:
        while True:
            out.append(next(it))
    except StopIteration as e:
        out.append(e.value)
    return out


x = torch.ones(2)
eager = consume(make(x))
compiled = consume(torch.compile(make, backend="eager")(x))
print("eager:   ", eager)
print("compiled:", compiled)
assert compiled[0] == eager[0] and compiled[-1] == eager[-1]

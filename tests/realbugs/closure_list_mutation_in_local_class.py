"""
issue: https://github.com/pytorch/pytorch/issues/197896
title: [dynamo] Mutations of a closure-captured list/dict are silently dropped when they happen in a method of a locally defined class instantiated inside the compiled function (`fullgraph=True`, no graph br...
kind: wrong_result
category: accuracy
stage: dynamo
culprit: list.append on a closure cell from a method of a locally defined class (Dynamo side effects)
fails_on: torch 2.13.0+cpu: the closure list stays empty after two compiled calls (eager: 2 items), backend=eager
"""

import torch
def make():
    state = []
    class Helper:
        def touch(self):
            state.append(1)
    def fn(x):
        Helper().touch()
        return x + 1
    return fn, state
fn, state = make(); fn(torch.ones(2)); fn(torch.ones(2)); e = len(state)
fn, state = make(); c = torch.compile(fn, backend="eager", fullgraph=True); c(torch.ones(2)); c(torch.ones(2))
print(e, len(state)); assert e == len(state)

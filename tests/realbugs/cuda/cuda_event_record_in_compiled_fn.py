"""
issue: https://github.com/pytorch/pytorch/issues/176486
title: RuntimeError: Event device type CPU does not match recording stream's device type
kind: crash
category: dynamo_internal
stage: dynamo
culprit: torch.cuda.Event.record traced by Dynamo (torch/_dynamo/variables/streams.py record_event)
fails_on: torch 2.11.0+cu130: RuntimeError: expected event to be a torch.Event object, raised by Dynamo while tracing, with every backend (eager, aot_eager, inductor); eager runs
"""

import torch

event = torch.cuda.Event()


@torch.compile
def f(x):
    event.record()
    return x + 1


print(f(torch.tensor(1.0, device="cuda")))

"""
issue: https://github.com/pytorch/pytorch/issues/141115
title: [AOTInductor] AOT compiled models do not consistently check input shapes
kind: wrong_result
category: accuracy
stage: inductor
culprit: the AOTInductor runtime's input shape checks (a static-shape package accepts another batch size)
fails_on: torch 2.13.0+cpu: ep.module() rejects a (3, 2) input (Guard failed: x.size()[0] == 1), the AOTI package returns a (1, 1) result for it
"""

# The model ran on CUDA with aot_compile; this is the same check with the packaging API on CPU.
import torch

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(2, 1)

    def forward(self, x):
        return self.fc(x)

model = Model().eval()
example = (torch.randn(1, 2),)
ep = torch.export.export(model, example)
path = torch._inductor.aoti_compile_and_package(ep)
aoti = torch._inductor.aoti_load_package(path)
print("happy path:", aoti(*example))
bad = torch.randn(3, 2)
try:
    ep.module()(bad)
except Exception as e:
    print("exported module rejects the batch of 3:", str(e).splitlines()[0])
try:
    out = aoti(bad)
except Exception as e:
    print("AOTI rejects it too:", type(e).__name__, str(e).splitlines()[0])
else:
    raise AssertionError(f"AOTI ran on a (3, 2) input it was compiled for (1, 2) and returned shape {tuple(out.shape)}")

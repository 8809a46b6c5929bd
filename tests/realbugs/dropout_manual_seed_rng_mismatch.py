"""
issue: https://github.com/pytorch/pytorch/issues/141557
title: [Inductor] Different behavior of `F.dropout()` in eval mode and mannual seed
kind: wrong_result
category: accuracy
stage: decomp_partition
culprit: aten.native_dropout (decomposed into aten.rand / aten.bernoulli drawn by the compiled code's own RNG, not eager's)
fails_on: torch 2.13.0+cpu: with the same manual_seed, 36/64 dropout-mask elements differ from eager (max abs diff 6.82)
workaround: torch._inductor.config.fallback_random = True (named in the thread: eellison, comment of 2024-12-06, "You need to use inductor_config.fallback_random = True if you're comparing numerics of inductor with rng"; checked: the script passes with it on torch 2.13.0+cpu)
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

print(torch.__version__)

SEED = 0


class Model(nn.Module):
    def forward(self, x):
        return F.dropout(x, p=0.5)  # training=True by default in the functional form, even under .eval()


with torch.no_grad():
    model = Model().eval()
    c_model = torch.compile(model)

    torch.manual_seed(SEED)
    x = torch.randn(4, 16)

    torch.manual_seed(SEED)
    eager = model(x)
    torch.manual_seed(SEED)
    compiled = c_model(x)

print("elements that differ:", (eager != compiled).sum().item(), "of", eager.numel())
torch.testing.assert_close(compiled, eager)

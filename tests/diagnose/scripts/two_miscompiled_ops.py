"""Two ops miscompiled (Inductor's planted relu and log1p accuracy bugs), in two compiled functions; the
program checks only the first function's result, so only the relu bug makes it fail (the log1p one is
only printed)."""

import torch

torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
torch._inductor.config.cpp.inject_log1p_bug_TESTING_ONLY = "accuracy"


@torch.compile
def scores(x):
    return torch.relu(x) * 2


@torch.compile
def summary(x):
    return torch.log1p(x.abs()).mean()


x = torch.randn(8, 8)
s = scores(x)
print("summary", summary(x).item())
torch.testing.assert_close(s, torch.relu(x) * 2)

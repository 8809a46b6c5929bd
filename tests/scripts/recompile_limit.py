import torch

torch._dynamo.config.recompile_limit = 2
torch._dynamo.config.fail_on_recompile_limit_hit = True


def g(x, n):
    return x * n


cg = torch.compile(g, backend="eager", dynamic=False)
for n in range(5):
    cg(torch.randn(3), n)

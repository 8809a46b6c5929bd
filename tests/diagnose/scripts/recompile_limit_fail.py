import torch

torch._dynamo.config.recompile_limit = 1
torch._dynamo.config.fail_on_recompile_limit_hit = True


@torch.compile(backend="eager")
def scale(x, k):
    return x * k


scale(torch.ones(3), 2)
scale(torch.ones(3), 3)  # k is a constant of the graph: a recompile, refused at the limit

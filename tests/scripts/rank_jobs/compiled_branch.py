"""A compiled function with a rank-dependent branch: rank 1 issues one all_reduce more per call, inside the
compiled graph. The first two calls still pair up (rank 0's second all_reduce with rank 1's second); then rank 0
is done and rank 1 waits in its third all_reduce: a hang (with --linger, while rank 0 stays alive)."""
import torch
import torch.distributed as dist
from rankjob import linger, setup, wait_for_device

rank, device, compiler = setup()


@torch.compile(backend=compiler)
def step(x):
    y = x * 2
    dist.all_reduce(y)
    if rank == 1:
        dist.all_reduce(y)
    return y


x = torch.ones(1024, device=device)
for _ in range(2):
    x = step(x)
wait_for_device(device)
print(rank, float(x[0]))
linger()
dist.destroy_process_group()

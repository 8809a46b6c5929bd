"""One all_reduce whose tensor has another size on each rank (4 elements on rank 0, 5 on rank 1), then a
barrier: a hang, an error, or a reduction over mismatched data."""
import torch
import torch.distributed as dist
from rankjob import setup, wait_for_device

rank, device, _ = setup()
x = torch.ones(4 + rank, device=device)
dist.all_reduce(x)
dist.barrier()
wait_for_device(device)
print(rank, x.tolist())
dist.destroy_process_group()

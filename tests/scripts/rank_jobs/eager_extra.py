"""An eager loop where rank 0 calls all_reduce once more than rank 1, then both call a barrier: the backend pairs
rank 0's third all_reduce with rank 1's barrier. A hang (or the backend's error)."""
import torch
import torch.distributed as dist
from rankjob import setup, wait_for_device

rank, device, _ = setup()
x = torch.ones(1024, device=device)
for _ in range(3 if rank == 0 else 2):
    dist.all_reduce(x)
dist.barrier()
wait_for_device(device)
dist.destroy_process_group()

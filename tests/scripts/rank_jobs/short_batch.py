"""A DDP model, compiled, whose rank 1 gets a shorter batch once (7 rows instead of 8): rank 1 recompiles, and
DDP's gradient all_reduces still pair up (the gradients have the parameters' shapes). The job ends."""
import torch
import torch.distributed as dist
from rankjob import setup, wait_for_device
from torch.nn.parallel import DistributedDataParallel

rank, device, compiler = setup()
model = DistributedDataParallel(torch.nn.Linear(16, 16).to(device), device_ids=[device] if device.type == "cuda" else None)
step = torch.compile(model, backend=compiler)
for i in range(3):
    rows = 7 if rank == 1 and i == 1 else 8
    step(torch.randn(rows, 16, device=device)).sum().backward()
wait_for_device(device)
dist.destroy_process_group()

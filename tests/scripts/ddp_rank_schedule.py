"""Two gloo ranks compile the same Inductor graph with two all_reduces; rank 1 alone turns on Inductor's
compute/communication reordering (a config only some ranks set), so its compiled code waits for the
collectives elsewhere: the same collectives, another schedule (they still pair up, so the job goes on).
Then the ranks run two small compiled graphs in opposite orders."""
import torch
import torch._inductor.config as inductor_config
import torch.distributed as dist
import torch.distributed._functional_collectives as fc

dist.init_process_group("gloo")
rank = dist.get_rank()
if rank == 1:
    inductor_config.reorder_for_compute_comm_overlap = True
    inductor_config.reorder_for_compute_comm_overlap_passes = ["sink_waits", "raise_comms"]


@torch.compile(backend="inductor")
def step(x, w):
    a = fc.all_reduce(x, "sum", dist.group.WORLD)
    h = (w @ w).relu() @ w
    b = fc.all_reduce(h, "sum", dist.group.WORLD)
    return a.sum() + b.sum()


@torch.compile(backend="eager")
def first(x):
    return x.sin() * 2


@torch.compile(backend="eager")
def second(x):
    return x.cos() * 3


print(step(torch.ones(8), torch.ones(16, 16)))
for f in (first, second) if rank == 0 else (second, first):
    f(torch.ones(4))
dist.destroy_process_group()

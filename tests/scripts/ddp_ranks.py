"""Two gloo ranks compile one function: rank 0 prints inside it (a graph break only rank 0 takes), rank 1
gets another batch size on the second step (a recompile only there); a compiled all_reduce that rank 1
recompiles for another scale (same shapes, so the job goes on); at the end rank 1's compiled graph raises
(an index out of range) while rank 0 finishes. Two graphs both ranks compile once, differently: `shard` for a
shard of another size on each rank, `sync` with its all_reduce inside only on rank 0 (rank 1 issues it
eagerly, after the graph, so the job still pairs up)."""
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()


@torch.compile(backend="eager")
def step(x):
    if rank == 0:
        print("rank 0 step")
    return x.sin().sum() * 2


@torch.compile(backend="eager")
def reduce_all(x, scale):
    y = x * scale
    dist.all_reduce(y)
    return y


@torch.compile(backend="eager")
def pick(x, i):
    return x[i]


@torch.compile(backend="eager")
def shard(x):
    return x.cos() * 2


@torch.compile(backend="eager")
def sync(x):
    y = x + 1
    if rank == 0:
        dist.all_reduce(y)
    return y


for i, n in enumerate((8, 6 if rank == 1 else 8)):
    total = reduce_all(step(torch.ones(n)).reshape(1), 2 + i * rank)
shard(torch.ones(4 + rank))
synced = sync(torch.ones(2))
if rank == 1:
    dist.all_reduce(synced)
dist.destroy_process_group()
print(pick(torch.ones(4), torch.tensor(10 if rank == 1 else 1)))

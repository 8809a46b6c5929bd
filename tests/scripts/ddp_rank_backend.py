"""Two gloo ranks compile an all_reduce alike; then rank 1 compiles `head` with a backend that fails on relu
(a testing backend torch registers), rank 0 with eager: only rank 1 fails, in a graph without collectives,
while rank 0 waits at the barrier for it."""
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()


@torch.compile(backend="eager")
def reduce_all(x):
    y = x * 2
    dist.all_reduce(y)
    return y


def head(x):
    return torch.relu(x).sum() + x.cos()


y = reduce_all(torch.ones(4))
backend = "relu_compile_error_TESTING_ONLY" if rank == 1 else "eager"
print(torch.compile(head, backend=backend)(y))
dist.barrier()
dist.destroy_process_group()

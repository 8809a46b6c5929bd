"""Two gloo ranks compile one function that reduces across ranks; rank 1 compiles it with a backend that
fails on relu (a testing backend torch registers), rank 0 with eager: rank 1's failing graph issues an
all_reduce, so no single process can reproduce it."""
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()


def step(x):
    y = torch.relu(x) * 2
    dist.all_reduce(y)
    return y


backend = "relu_compile_error_TESTING_ONLY" if rank == 1 else "eager"
print(torch.compile(step, backend=backend)(torch.ones(4)))
dist.destroy_process_group()

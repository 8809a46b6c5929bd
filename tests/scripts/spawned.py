"""Two processes from torch.multiprocessing.spawn, no process group: each compiles the same function at
its own size, so both have compile id 0/0 and only the second process recompiles."""
import torch
import torch.multiprocessing as mp


def work(index):
    f = torch.compile(lambda x: x.cos() + 1, backend="eager")
    for n in ((4, 4) if index == 0 else (4, 5)):
        f(torch.ones(n))


if __name__ == "__main__":
    mp.spawn(work, nprocs=2)

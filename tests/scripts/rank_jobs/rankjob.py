"""What the jobs in this directory share: the process group on either backend, and the device of this rank.

`--backend gloo` (CPU, the default) or `nccl` (one GPU per rank, cuda:LOCAL_RANK); `--pg-timeout S`, the job's
own collective timeout (a hang then ends in the backend's error, not at pt2doctor's --timeout); `--compiler B`,
torch.compile's backend for the jobs that compile (default eager); `--linger S`, how long a rank that is done
stays alive before it exits (as one that goes on to evaluate or save would; gloo fails a peer's pending
collective as soon as the process at the other end exits)."""
import argparse
import datetime
import os
import time

import torch
import torch.distributed as dist


def setup() -> tuple[int, torch.device, str]:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="gloo", choices=("gloo", "nccl"))
    parser.add_argument("--pg-timeout", type=float, default=None)
    parser.add_argument("--compiler", default="eager")
    parser.add_argument("--linger", type=float, default=0.0)
    args = parser.parse_args()
    global _linger
    _linger = args.linger
    timeout = {"timeout": datetime.timedelta(seconds=args.pg_timeout)} if args.pg_timeout else {}
    if args.backend == "nccl":
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device, **timeout)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo", **timeout)
    return dist.get_rank(), device, args.compiler


_linger = 0.0


def linger() -> None:
    """A rank that is done stays alive a while (`--linger`), without issuing a collective."""
    time.sleep(_linger)


def wait_for_device(device: torch.device) -> None:
    """Where the host waits for the collectives it issued (NCCL runs them on the GPU, asynchronously)."""
    if device.type == "cuda":
        torch.cuda.synchronize()

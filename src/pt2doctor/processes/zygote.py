"""The warm workers: import torch once, warm Inductor once, then run each candidate isolated.

Run as `python -m pt2doctor.processes.zygote JOBS`, or forked from a parent that has already
imported torch (`serve_forked`, which saves the zygote its own `import torch`); spoken to only by
`processes.pool.WorkerPool`.
Contract:
- Protocol: `processes.dispatch`'s, on stdin/stdout.
- Isolation, two ways, one contract: a crash, abort, hang (killed at its timeout, with any gcc it
  started) or OOM kills only that candidate. At most JOBS candidates run at once.
  - `Forks` (no GPU, `processes.forks`): each candidate runs in a child forked from the warm zygote, in its own
    process group. The zygote stays single-threaded (torch.set_num_threads(1), Inductor
    compile_threads=1) because forking a process with live OpenMP or compile-pool threads can
    deadlock the child.
  - `Servers` (a GPU, `processes.servers`): a process that touched the CUDA driver cannot fork
    children that use it, so candidates run in warm reusable interpreters instead, under the
    same contract.
  `Servers` are used when the parent asks for them (`--servers`: it saw a GPU's device files and
  started this zygote without torch, so the servers' warm-up overlaps its own `import torch`),
  when torch sees a GPU, or when, after warming, a test fork shows its children would be bad.
- Stdin closing (the parent died) or a signal ends the zygote and kills its children.
"""

from __future__ import annotations

import os
import signal
import sys

from pt2doctor.processes.dispatch import Dispatcher, warm_up
from pt2doctor.processes.forks import Forks, forks_poisoned
from pt2doctor.processes.protocol import Ready, StartFailed, send


def _uses_servers() -> bool:
    """Servers where torch sees a GPU (asking poisons forks, but then nothing is forked)."""
    import torch

    return bool(torch.version.cuda or torch.version.hip) and torch.cuda.is_available()


def _serve(jobs: int, out_fd: int, servers: bool) -> None:
    """`servers`: the parent chose them; else choose here, warming up to fork if not."""
    try:
        if not servers and not (servers := _uses_servers()):
            warm_up("cpu")
            servers = forks_poisoned()
    except Exception as exc:  # tell the parent why, rather than dying silently
        send(out_fd, StartFailed(f"{type(exc).__name__}: {exc}"[:2000]))
        return
    send(out_fd, Ready())
    if servers:
        from pt2doctor.processes.servers import Servers

        dispatcher: Dispatcher = Servers(jobs, out_fd)
    else:
        dispatcher = Forks(jobs, out_fd)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        dispatcher.serve()
    except KeyboardInterrupt:
        pass
    finally:
        dispatcher.shutdown()


def main(argv: list[str]) -> int:
    """`JOBS [--servers]`; with `--servers` the zygote never imports torch itself."""
    out_fd = os.dup(1)
    os.dup2(2, 1)  # stray prints from torch must not corrupt the protocol
    _serve(int(argv[1]) if len(argv) > 1 else 1, out_fd, servers="--servers" in argv[2:])
    os._exit(0)  # skip torch's interpreter teardown (~1 s): the parent waits for this exit


def serve_forked(jobs: int, request_fd: int, out_fd: int, quiet: bool, env: dict[str, str] | None = None) -> None:
    """In a child just forked from the parent: serve requests from `request_fd`; never returns."""
    try:
        os.environ.update(env or {})
        os.dup2(request_fd, 0)
        if quiet:
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 2)
        os.dup2(2, 1)
        _serve(jobs, out_fd, servers=False)
    finally:
        os._exit(0)  # never run the parent's code (or its atexit handlers) in this process


if __name__ == "__main__":
    sys.exit(main(sys.argv))

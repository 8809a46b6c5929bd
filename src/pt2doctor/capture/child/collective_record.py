"""A rank's collectives, from torch's Flight Recorder, written where the parent reads them.

Contract: `install(rank_dir, deadline_s)` (from the main thread, before the script runs) turns the Flight
Recorder on for the process groups the script makes (unless the user configured it), points NCCL's own dump on
timeout at `rank_dir`, and arranges the record to be written when the rank is stopped: just before pt2doctor's
`--timeout` (a timer thread, with a deadline in seconds from now), and on SIGTERM (torchrun stops the other
ranks so when one fails). A rank blocked in a collective never returns to Python, so SIGTERM is seen by a
thread reading the signal wakeup fd, which writes the record and ends the process as SIGTERM would have
(exit 128 + SIGTERM) unless the script installed a SIGTERM handler of its own (that one then decides).
`write(when)` writes `rank_dir/collectives.json` (a `RankCollectives`) now; the bootstrap calls it when the
script ends or raises (a collective's own timeout). Writing never raises: the record is evidence, and must
not mask the script's outcome.
"""

from __future__ import annotations

import importlib.metadata
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from types import FrameType

from pt2doctor.model.collectives import COLLECTIVES_FILE

_dir: Path | None = None
_lock = threading.Lock()
_wakeup: tuple[socket.socket, socket.socket] | None = None  # kept open for the process's life


def install(rank_dir: Path, deadline_s: float | None) -> None:
    global _dir
    from pt2doctor.capture import torch_compat
    from pt2doctor.capture.collectives import NCCL_DUMP_PREFIX

    _dir = rank_dir
    version = importlib.metadata.version("torch")
    for name, value in torch_compat.flight_recorder_env(version).items():
        os.environ.setdefault(name, value)
    for name in torch_compat.flight_recorder_dump_env(version):
        os.environ.setdefault(name, str(rank_dir / NCCL_DUMP_PREFIX))
    if deadline_s is not None:
        timer = threading.Timer(deadline_s, write, args=("before the timeout",))
        timer.daemon = True
        timer.start()
    _watch_for_sigterm()


def _watch_for_sigterm() -> None:
    global _wakeup
    try:
        reader, writer = socket.socketpair()
        writer.setblocking(False)
        signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):  # not the main thread, or no socket pair: the other moments still write
        return
    _wakeup = (reader, writer)
    threading.Thread(target=_read_wakeups, args=(reader,), name="pt2doctor-sigterm", daemon=True).start()


def _read_wakeups(reader: socket.socket) -> None:
    while data := reader.recv(64):
        if signal.SIGTERM in data:
            _stopped()


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    _stopped()


def _stopped() -> None:
    write("when the job stopped it")
    if signal.getsignal(signal.SIGTERM) is _on_sigterm:  # else the script's own handler decides
        os._exit(128 + signal.SIGTERM)


def write(when: str) -> None:
    if _dir is None or "torch.distributed" not in sys.modules:
        return
    try:
        from pt2doctor.capture import torch_compat
        from pt2doctor.capture.collectives import merged, rank_record
        from pt2doctor.model.serialize import write_record

        dumps = torch_compat.flight_recorder_dumps()
        if not dumps:
            return
        record = rank_record(merged(dumps), "flight recorder", when, torch_compat.FLIGHT_RECORDER_SIZE)
        with _lock:
            write_record(_dir / COLLECTIVES_FILE, record)
    except Exception:
        return

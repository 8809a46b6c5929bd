"""torch's Flight Recorder: the record of every collective a process issued, for NCCL and the CPU backends.

Checked on torch 2.13.0 (CPU: ProcessGroupGloo records into the CPU Flight Recorder, dumped by
`torch._C._distributed_c10d._dump_fr_trace`); NCCL's recorder is another one, dumped by `_dump_nccl_trace` in
CUDA builds. Both are on only when `TORCH_FR_BUFFER_SIZE` (or the older `TORCH_NCCL_TRACE_BUFFER_SIZE`) is set
when the process group is made: `ENV` is what a rank's child sets, unless the user set it.
"""

from __future__ import annotations

import pickle
from typing import Any

BUFFER_SIZE = 2_000  # collectives kept per process (a ring buffer: the oldest go first; a hang is at the end)
ENV = {
    "TORCH_FR_BUFFER_SIZE": str(BUFFER_SIZE),
    "TORCH_NCCL_TRACE_BUFFER_SIZE": str(BUFFER_SIZE),  # torch < 2.8 reads only this one for NCCL
    "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",  # NCCL's watchdog dumps every rank's record when a collective times out
}
DUMP_FILE_ENV = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")  # where it dumps: a prefix + rank


def dumps() -> list[Any]:
    """The dumps (unpickled: plain dicts and lists) of every Flight Recorder this process has; [] without any."""
    try:
        from torch._C import _distributed_c10d as c10d
    except ImportError:
        return []
    out = []
    for name in ("_dump_fr_trace", "_dump_nccl_trace"):
        dump = getattr(c10d, name, None)
        if dump is None:
            continue
        try:
            out.append(pickle.loads(dump(includeCollectives=True, includeStackTraces=True, onlyActive=False)))
        except Exception:  # a recorder that was never used (no NCCL group), or another signature
            continue
    return out

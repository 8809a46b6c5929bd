"""torch's Flight Recorder: the record of every collective a process issued, for NCCL and the CPU backends.

Checked on torch 2.13.0 (CPU: ProcessGroupGloo records into the CPU Flight Recorder, dumped by
`torch._C._distributed_c10d._dump_fr_trace`); NCCL's recorder is another one, dumped by `_dump_nccl_trace` in
CUDA builds. Both are on only when `TORCH_FR_BUFFER_SIZE` (or the older `TORCH_NCCL_TRACE_BUFFER_SIZE`) is set
when the process group is made: `env(torch_version)` is what a rank's child sets, unless the user set it, under the
names that torch reads: from 2.8 the `TORCH_FR_*` ones (torch warns, on every rank, that the `TORCH_NCCL_*` ones are
deprecated), before it the `TORCH_NCCL_*` ones too (checked on 2.11 and 2.13).
"""

from __future__ import annotations

import pickle
from typing import Any

BUFFER_SIZE = 2_000  # collectives kept per process (a ring buffer: the oldest go first; a hang is at the end)
_RENAMED_IN = (2, 8)  # the release that reads the TORCH_FR_* names and deprecates the TORCH_NCCL_* ones


def env(torch_version: str) -> dict[str, str]:
    """The Flight Recorder's settings for a rank of `torch_version`: its buffer, and NCCL's dump on a timeout."""
    out = {"TORCH_FR_BUFFER_SIZE": str(BUFFER_SIZE),
           "TORCH_NCCL_DUMP_ON_TIMEOUT": "1"}  # NCCL's watchdog dumps every rank's record when a collective times out
    if _release(torch_version) < _RENAMED_IN:
        out["TORCH_NCCL_TRACE_BUFFER_SIZE"] = str(BUFFER_SIZE)
    return out


def dump_file_env(torch_version: str) -> tuple[str, ...]:
    """Where a rank dumps its record: the variables (a prefix, the rank appended) that `torch_version` reads."""
    return ("TORCH_FR_DUMP_TEMP_FILE",) + (("TORCH_NCCL_DEBUG_INFO_TEMP_FILE",)
                                           if _release(torch_version) < _RENAMED_IN else ())


def _release(version: str) -> tuple[int, int]:
    parts = [int(p) for p in version.split("+")[0].split(".")[:2] if p.isdigit()]
    return (parts + [0, 0])[0], (parts + [0, 0])[1]


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

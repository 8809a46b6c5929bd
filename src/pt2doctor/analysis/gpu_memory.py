"""A CUDA out-of-memory that other processes caused: the machine's state, not the program's (issue 40, point 1).

Contract: `held_by_others(message) -> HeldMemory | None` reads torch's out-of-memory message (c10's CUDA caching
allocator: "Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 139.81 GiB of which 2.92 GiB is free. Process
4242 has 120.00 GiB memory in use. Including non-PyTorch memory, this process has 16.00 GiB memory in use. ...") and
says whether the allocation would have fitted had the other processes not held their memory. Where torch lists the
processes (NVML), the others' memory is the list's sum less this process's own; where it does not, the capacity
less what is free and what this process holds. None where the message is not a CUDA out-of-memory, or the program
alone needs more than the GPU has: that failure is the program's, and is diagnosed as one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_UNITS = {"bytes": 1 / 2**30, "KiB": 1 / 2**20, "MiB": 1 / 2**10, "GiB": 1.0, "TiB": 2.0**10}
_AMOUNT = r"([\d.]+) (bytes|KiB|MiB|GiB|TiB)"
_TRIED = re.compile(rf"Tried to allocate {_AMOUNT}")
_CAPACITY = re.compile(rf"total capacity of {_AMOUNT} of which {_AMOUNT} is free")
_PROCESS = re.compile(rf"Process (\d+) has {_AMOUNT} memory in use")
_THIS = re.compile(rf"this process has {_AMOUNT} memory in use")
# GiB held by others below which they cannot be what stood between the program and its memory: where torch lists
# the processes, and where it does not (then the driver's own reservation is in the difference too)
_LEAST_LISTED, _LEAST_UNLISTED = 0.5, 2.0


def _gib(value: str, unit: str) -> float:
    return float(value) * _UNITS[unit]


@dataclass(frozen=True, slots=True)
class HeldMemory:
    """What a CUDA out-of-memory said, in GiB: the allocation tried, the GPU's capacity and what was free, what the
    run's own process held, and what other processes held (`others`: pid and GiB, where torch listed them)."""

    tried: float
    capacity: float
    free: float
    own: float
    held_by_others: float
    others: tuple[tuple[int, float], ...] = ()

    def describe(self) -> str:
        """`other processes held 120.0 GiB of the GPU's 139.8 GiB (process 4242: 120.0 GiB); the run asked for 20.0
        GiB more with 2.9 GiB free, holding 16.0 GiB itself`."""
        listed = "; ".join(f"process {pid}: {gib:.1f} GiB" for pid, gib in self.others)
        return (f"other processes held {self.held_by_others:.1f} GiB of the GPU's {self.capacity:.1f} GiB"
                + (f" ({listed})" if listed else "")
                + f"; the run asked for {self.tried:.1f} GiB more with {self.free:.1f} GiB free, holding "
                  f"{self.own:.1f} GiB itself")


def held_by_others(message: str) -> HeldMemory | None:
    tried, capacity = _TRIED.search(message), _CAPACITY.search(message)
    if tried is None or capacity is None:
        return None
    this = _THIS.search(message)
    own = _gib(*this.groups()) if this else 0.0
    total, free = _gib(*capacity.groups()[:2]), _gib(*capacity.groups()[2:])
    listed = tuple((int(m.group(1)), _gib(m.group(2), m.group(3))) for m in _PROCESS.finditer(message))
    # torch lists every process on the device, this one too: the largest entry within a rounding of `own` is it
    mine = min(listed, key=lambda p: abs(p[1] - own), default=None) if listed else None
    others = tuple(p for p in listed if p is not mine or abs(p[1] - own) > 0.01 * max(own, 1.0))
    held = sum(gib for _, gib in others) if listed else max(0.0, total - free - own)
    asked = _gib(*tried.groups())
    if held < (_LEAST_LISTED if listed else _LEAST_UNLISTED) or asked > free + held:
        return None  # nobody else held much, or it would not have fitted anyway
    return HeldMemory(asked, total, free, own, held, others)

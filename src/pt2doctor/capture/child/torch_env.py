"""Facts about the torch in this process: versions, devices, the compiler, non-default config.

Contract: `describe(torch)` returns JSON-ready facts; it never raises for a missing CUDA or compiler.
Only called in a process that already imported torch (the child at exit, or `watch()`).
"""

from __future__ import annotations

import shutil
from typing import Any

from pt2doctor.capture import torch_compat
from pt2doctor.processes import launch


def describe(torch: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {"torch": torch.__version__, "cuda": getattr(torch.version, "cuda", None)}
    try:
        if torch.cuda.is_available():
            facts["gpu"] = torch.cuda.get_device_name(0)
    except Exception:
        facts["gpu"] = None
    facts["compiler"] = cxx_version()
    facts["config_diff"] = torch_compat.config_diff()
    facts["gpu_peak_bytes"], facts["gpu_total_bytes"] = gpu_memory(torch)
    return facts


_BESIDE_AT_MOST = 2 * 2**30


def gpu_memory(torch: Any) -> tuple[int | None, int | None]:
    """The most memory this process held on the GPU it used most, and that GPU's size; (None, None) when it used
    none. The peak is the caching allocator's most reserved plus what the process holds beside it now (the CUDA
    context, a library's workspace): `total - free - reserved` at exit, at most `_BESIDE_AT_MOST` (free memory is the
    device's: more than that is another process's). With the allocator off (PYTORCH_NO_CUDA_MEMORY_CACHING) the
    process's own peak is not known, only the device's: (None, the GPU's size). After a kernel fault, see `_held`."""
    try:
        if not torch.cuda.is_initialized():
            return None, None
        best: tuple[int | None, int] | None = None
        for device in range(torch.cuda.device_count()):
            most = torch.cuda.max_memory_reserved(device)
            if not most:  # unused here (asking a device for its free memory would make it a context)
                continue
            peak, total = _held(torch, device, most)
            if best is None or peak > (best[0] or 0):
                best = (int(peak), int(total))
        if best is None:  # initialized, the caching allocator off: the GPU was used, by how much is not known
            best = (None, int(torch.cuda.mem_get_info(torch.cuda.current_device())[1]))
        return best
    except Exception:  # a device in a bad state (a kernel fault): the facts are best effort
        return None, None


def _held(torch: Any, device: int, most: int) -> tuple[int, int]:
    """What the process held on `device` at its most, and the device's size. After a kernel fault the device
    answers nothing (`mem_get_info` raises: the context is lost) while the allocator's counts and the device's size
    are the host's: what it held beside the allocator is then taken at its most, so a run that crashed a kernel
    still says how much room the program needs (its repeat and a workaround's run may then share the GPU)."""
    try:
        free, total = torch.cuda.mem_get_info(device)
    except Exception:  # a kernel fault
        return most + _BESIDE_AT_MOST, int(torch.cuda.get_device_properties(device).total_memory)
    return most + min(_BESIDE_AT_MOST, max(0, total - free - torch.cuda.memory_reserved(device))), total


def cxx_version() -> str | None:
    """The C++ compiler Inductor would find, in one line (`--version`'s first); no torch needed."""
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if cxx is None:
        return None
    try:
        ran = launch.run([cxx, "--version"], timeout_s=5)
    except OSError:
        return None
    return ran.stdout.splitlines()[0] if ran.stdout else None

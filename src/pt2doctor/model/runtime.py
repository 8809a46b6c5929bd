"""Runtime triage's records: what the kernel checker saw in the child, and what `diagnose` concluded.

Contract: the kernel checker (`capture.child.kernel_check`) appends, with the codec, one
`CompiledKernels` line per graph Inductor compiled (`RUN_DIR/kernels/compiled.jsonl`: each kernel
and the FX nodes fused into it, with their provenance) and one `KernelEvent` per kernel that went
wrong (`RUN_DIR/kernels/events.jsonl`), and keeps the kernel in flight in a memory-mapped marker
(`RUN_DIR/kernels/inflight`: `g0003 2 cpp_fused_div_elu_0 run`, `... done` once it returned), so a
process that dies of a signal still names it. `KernelCheckSpec` is the child spec's part (`Hooks`).
`RuntimeTriage` is the diagnosis's account (`diagnose.runtime_triage`), with compute-sanitizer's
`SanitizerFinding`; `NeedsCompiler` the stage comparison's (`diagnose.stage_signatures`). Torch-free.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Literal

import msgspec

from pt2doctor.model.minify import NodeOrigin
from pt2doctor.model.serialize import read_lines

KERNELS_DIR = "kernels"
MARKER_SIZE = 256

EagerVerdict = Literal["finite", "nonfinite", "unknown"]


class KernelCheckSpec(msgspec.Struct, frozen=True, omit_defaults=True):
    """Check every Inductor kernel's outputs as the program runs; `clone_budget_bytes` caps the copies of a
    graph's inputs kept for the eager comparison (past it, the comparison is skipped and said so)."""

    out: str
    clone_budget_bytes: int = 1 << 30
    sync: bool = False  # CUDA: synchronize after every kernel (its error is raised by its own launch)


class FusedKernel(msgspec.Struct, frozen=True, omit_defaults=True):
    """One kernel of a compiled graph: its name in Inductor's output code and the FX nodes fused into it
    (the after-AOT graph's names, as Inductor's provenance tracking gives them), with their provenance."""

    name: str
    nodes: tuple[str, ...] = ()
    origins: tuple[NodeOrigin, ...] = ()


class CompiledKernels(msgspec.Struct, frozen=True, omit_defaults=True):
    """The kernels of one graph Inductor compiled (`graph`: the recorder's id of its after-AOT graph)."""

    graph: str
    kernels: tuple[FusedKernel, ...] = ()
    instrumented: bool = True  # False: the output code's kernels could not be wrapped (see `note`)
    note: str = ""


class BadTensor(msgspec.Struct, frozen=True, omit_defaults=True):
    """A kernel argument that holds new non-finite values after the kernel ran."""

    arg: int
    shape: tuple[int, ...]
    dtype: str
    nan: int = 0
    posinf: int = 0
    neginf: int = 0


class IndexRange(msgspec.Struct, frozen=True):
    """An indexing node's index values against the size they index (eager, on the same inputs)."""

    node: str
    op: str
    low: int
    high: int
    size: int

    @property
    def out_of_range(self) -> bool:
        return self.low < -self.size or self.high >= self.size


class IndexCheck(msgspec.Struct, frozen=True):
    """A graph's indexing nodes whose index is a graph input, on its first call (`kernels/ranges.jsonl`)."""

    graph: str
    ranges: tuple[IndexRange, ...]


class KernelEvent(msgspec.Struct, frozen=True, omit_defaults=True):
    """A kernel that went wrong: `nonfinite` (an argument holds new NaN/Inf after it ran; `eager` says whether
    the graph run op by op gives non-finite values at its nodes too) or `raised` (its launch or the sync after
    it raised `error`) or `null_data` (written before its launch: a tensor argument with elements has data pointer 0,
    a ZeroTensor's; `error` says which). `call` counts the graph's calls, `ordinal` the kernel's launches in that
    call."""

    graph: str
    kernel: str
    kind: Literal["nonfinite", "raised", "null_data"]
    call: int = 1
    ordinal: int = 0
    bad: tuple[BadTensor, ...] = ()
    inputs_finite: bool | None = None
    eager: EagerVerdict = "unknown"
    error: str = ""
    index_ranges: tuple[IndexRange, ...] = ()


def read_compiled(run_dir: Path) -> list[CompiledKernels]:
    return read_lines(run_dir / KERNELS_DIR / "compiled.jsonl", CompiledKernels)


def read_events(run_dir: Path) -> list[KernelEvent]:
    return read_lines(run_dir / KERNELS_DIR / "events.jsonl", KernelEvent)


def read_index_checks(run_dir: Path) -> list[IndexCheck]:
    return read_lines(run_dir / KERNELS_DIR / "ranges.jsonl", IndexCheck)


def read_inflight(run_dir: Path) -> str:
    path = run_dir / KERNELS_DIR / "inflight"
    return path.read_bytes().decode(errors="replace").strip() if path.exists() else ""


class FaultKind(str, Enum):
    """What kind of fault the first bad kernel made, as `analysis.runtime_faults` tells it."""

    OUT_OF_BOUNDS = "out_of_bounds"  # an index past the size it indexes
    NAN_FROM_FINITE = "nan_from_finite"  # NaN out of finite inputs, where eager has none
    OVERFLOW = "overflow"  # Inf where eager stays finite
    MEMORY_CORRUPTION = "memory_corruption"  # the heap found corrupted after the kernel returned
    BAD_ACCESS = "bad_access"  # the process died inside the kernel (a segfault, an illegal address)
    DEVICE_ERROR = "device_error"  # the kernel's launch or sync raised (a device-side assert, a CUDA error)


# a kernel that reads or writes outside its buffers: what it finds or overwrites there changes from run to run, and so
# may whether it faults (a likely cause of a failure that does not repeat)
ACCESS_FAULTS = (FaultKind.BAD_ACCESS, FaultKind.MEMORY_CORRUPTION, FaultKind.OUT_OF_BOUNDS)


class KernelFault(msgspec.Struct, frozen=True):
    """The first kernel that went wrong (`analysis.runtime_faults`): in recorded graph `graph`, the FX nodes
    fused into it, their ops, the user's calls and lines they came from, and the fault in plain words."""

    graph: str
    kernel: str
    nodes: tuple[str, ...]
    ops: tuple[str, ...]
    sources: tuple[NodeOrigin, ...]
    kind: FaultKind
    words: str


SanitizerSaid = Literal["access", "assert", "errors", "nothing", "not_run"]


class SanitizerFinding(msgspec.Struct, frozen=True, omit_defaults=True):
    """What compute-sanitizer's memcheck said of the script, run on its own (`analysis.runtime_faults`): its
    first invalid or misaligned access (`access`: the kernel, read or write, its size in bytes, the line of the
    kernel's source, how far from which allocation), a failed device-side assert (`assert`), errors of another kind
    (`errors`), none (`nothing`), or why it did not run (`not_run`); `words` says it in plain words."""

    said: SanitizerSaid
    words: str
    error: str = ""  # the access in words: `an invalid global read of 4 bytes`, `a misaligned ... address`
    kernel: str = ""
    operation: str = ""  # read, write, atomic, misaligned
    size: int = 0  # bytes
    source: str = ""  # `file.py:29`: where in the kernel's source, as memcheck names it
    allocation: str = ""  # where the address fell: `8 bytes after an allocation of 40 bytes`
    code: str = ""  # the kernel's source at `source`, where the run's compile cache held it
    errors: int | None = None  # memcheck's ERROR SUMMARY count


class RuntimeTriage(msgspec.Struct, frozen=True, omit_defaults=True):
    """Runtime triage's account: the first kernel that went wrong (`fault`, None when no kernel is to blame),
    from the deterministic re-run with every kernel checked (`run`: its label, "" when it was not needed) and
    what compute-sanitizer said (`sanitizer`: on CUDA, or why it did not run); `seconds` the whole triage took,
    each of its two runs held to `budget_s` (`out_of_time`: the checked run's ran out, what was found is kept)."""

    fault: KernelFault | None = None
    sanitizer: SanitizerFinding | None = None
    seconds: float = 0.0
    budget_s: float = 0.0
    out_of_time: bool = False
    run: str = ""  # the run's label (its directory under runs/)
    notes: tuple[str, ...] = ()


class NeedsCompiler(msgspec.Struct, frozen=True):
    """The runs without the original backend (`uncompiled`: backend or `force_eager`, and how it failed) end otherwise
    than the compiled run (`compiled`), and say nothing about where its failure is: for want of a resource the
    compiled program does not need (`resource`: memory, the unfused reference materializes what the kernel never
    does), or because the compiled run failed compiling (`compile_failure`: the backend raised, as the script caught it
    or not), which no run without that backend can show; their own failure is the program's, past that compile."""

    compiled: str
    uncompiled: tuple[tuple[str, str], ...]
    resource: str
    compile_failure: bool = False

    def describe(self) -> str:
        runs = "; ".join(f"{label}: {sig}" for label, sig in self.uncompiled)
        if self.compile_failure:
            return (f"the runs below the original backend fail otherwise ({runs}), while compiled the program fails "
                    f"in the backend's compile ({self.compiled}), which those runs cannot show: the compile failure "
                    "is diagnosed, theirs is the program's own, past that compile")
        return (f"the program cannot run without the compiler ({self.resource}: {runs}), while compiled it fails "
                f"with {self.compiled}: the compiled program is diagnosed")

"""Which kernel went wrong first in a checked run, and what kind of fault it made, in plain words.

Contract: `first_bad_kernel(compiled, events, index_checks, inflight, ended_by, assertion)` is a pure function
of what the kernel checker wrote (`model.runtime`), how the run ended (`ended_by`: a signal's name, or
an error's `Type: message`, or "" when it passed) and the device-side assert the run printed (`assertion`, read
from its output by `device_assertion`): a `KernelFault`, or None when no kernel is to blame.
The rules, first that applies:
1. a kernel whose launch (or the sync after it) raised: a device error; an out-of-bounds index when
   one of its indexing nodes' index values fall outside the size they index, or when the kernel's own bounds
   check failed (Inductor's `index out of bounds: 0 <= tmp4 < ks0` assert: an index the kernel computes,
   which the graph's inputs do not show);
2. the first kernel that made NaN/Inf where the same ops run eagerly do not (or eager could not be
   run): NaN from finite inputs, NaN eager does not make, or an overflow eager avoids;
3. the process died of a signal with a kernel in flight (the marker says `run`): a bad access in it
   (out of bounds when an input index of its graph is out of range; through a null pointer when one of
   its tensor arguments had no memory, a ZeroTensor); with none in flight, after a
   kernel returned, and of SIGABRT (glibc's heap checks): memory corruption by the kernel that ran last.
`sanitizer_finding(output)` reads compute-sanitizer memcheck's output (a run of its own) into a
`SanitizerFinding` (`with_code` adds the kernel's source line); `with_sanitizer(fault, finding)` weighs it
against the checked run's fault: an invalid access in the same kernel confirms it (a device error becomes a
bad access), one in another kernel is said;
`sanitizer_fault(compiled, finding)` is the fault memcheck alone found, where the checked run found none.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import msgspec

from pt2doctor.model.minify import source_calls
from pt2doctor.model.runtime import (
    BadTensor,
    CompiledKernels,
    FaultKind,
    FusedKernel,
    IndexCheck,
    IndexRange,
    KernelEvent,
    KernelFault,
    SanitizerFinding,
)

# what makes NaN out of finite values, by op: the words for a kernel that fuses it
_NAN_MAKERS = {"div": "0/0 or inf/inf", "log": "log of a negative number", "log2": "log of a negative number",
               "log10": "log of a negative number", "log1p": "log1p below -1", "sqrt": "sqrt of a negative number",
               "rsqrt": "rsqrt of a negative number", "pow": "a negative base to a fractional power",
               "acos": "acos outside [-1, 1]", "asin": "asin outside [-1, 1]", "fmod": "fmod by 0",
               "remainder": "remainder by 0", "var": "a variance of too few elements"}
# these make NaN only from an Inf, which finite inputs reach through an overflow inside the kernel
_NAN_FROM_INF = {"sub": "inf - inf", "add": "inf + (-inf)", "mul": "0 * inf", "exp": "exp overflowing to inf"}
_OVERFLOW_MAKERS = ("exp", "pow", "mul", "sum", "cumsum", "prod", "add", "matmul", "mm", "bmm", "square")
_LOW_PRECISION = ("float16", "bfloat16")
_HEAP_SIGNALS = ("SIGABRT",)


def first_bad_kernel(compiled: Sequence[CompiledKernels], events: Sequence[KernelEvent],
                     index_checks: Sequence[IndexCheck], inflight: str, ended_by: str,
                     assertion: str | None = None) -> KernelFault | None:
    kernels = {(c.graph, k.name): k for c in compiled for k in c.kernels}
    raised = next((e for e in events if e.kind == "raised"), None)
    if raised is not None:
        kernel = kernels.get((raised.graph, raised.kernel))
        ranges = [*raised.index_ranges, *_input_ranges(index_checks, raised.graph, kernel)]
        return _fault(raised.graph, kernel, raised.kernel, *_raised_kind(raised, ranges, assertion))
    own = next((e for e in events if e.kind == "nonfinite" and e.eager != "nonfinite"), None)
    if own is not None:
        kernel = kernels.get((own.graph, own.kernel))
        return _fault(own.graph, kernel, own.kernel, *_nonfinite_kind(own, _ops(kernel)))
    parts = inflight.split()
    if len(parts) != 4 or not ended_by.startswith("SIG"):
        return None
    graph, _, name, state = parts
    kernel = kernels.get((graph, name))
    if state == "run":
        ranges = [r for r in _input_ranges(index_checks, graph, kernel) if r.out_of_range]
        if ranges:
            return _fault(graph, kernel, name, FaultKind.OUT_OF_BOUNDS,
                          f"the process died of {ended_by} inside kernel {name}; " + _ranges_words(ranges))
        null = next((e for e in events if e.kind == "null_data" and (e.graph, e.kernel) == (graph, name)), None)
        why = (f": its {null.error}, and the kernel reads through that null pointer" if null else
               ": it read or wrote memory it does not own (an address outside its buffers)")
        return _fault(graph, kernel, name, FaultKind.BAD_ACCESS,
                      f"the process died of {ended_by} inside kernel {name}{why}")
    if ended_by in _HEAP_SIGNALS:
        return _fault(graph, kernel, name, FaultKind.MEMORY_CORRUPTION,
                      f"the process died of {ended_by} after kernel {name} returned, with no kernel running: the "
                      "C library found its heap corrupted, most likely by the kernel that ran last writing past "
                      "the end of a buffer")
    return None


def _fault(graph: str, kernel: FusedKernel | None, name: str, kind: FaultKind, words: str) -> KernelFault:
    return KernelFault(graph, name, kernel.nodes if kernel else (), _ops(kernel),
                       source_calls(kernel.origins) if kernel else (), kind, words)


def _ops(kernel: FusedKernel | None) -> tuple[str, ...]:
    return tuple(dict.fromkeys(o.op for o in kernel.origins if o.op)) if kernel else ()


def _packet(op: str) -> str:
    """`aten.div.Tensor` -> `div`."""
    parts = op.split(".")
    return parts[1] if len(parts) > 1 and parts[0] in ("aten", "prims") else parts[-1]


def _input_ranges(index_checks: Sequence[IndexCheck], graph: str, kernel: FusedKernel | None) -> list[IndexRange]:
    """The ranges of `graph`'s input indices (its first call) at `kernel`'s nodes (all of them, kernel unknown)."""
    return [r for c in index_checks if c.graph == graph for r in c.ranges if kernel is None or r.node in kernel.nodes]


def _raised_kind(event: KernelEvent, ranges: Sequence[IndexRange], assertion: str | None) -> tuple[FaultKind, str]:
    bad = list({(r.node, r.low, r.high): r for r in ranges if r.out_of_range}.values())
    if bad:
        return FaultKind.OUT_OF_BOUNDS, f"kernel {event.kernel} raised {event.error}; " + _ranges_words(bad)
    own = (f"kernel {event.kernel} raised {event.error} (with launches blocking and a sync after each kernel, so it "
           "is this kernel's own error)")
    check = _BOUNDS_CHECK.search(assertion or event.error or "")
    if check is not None:
        inputs = ("the index inputs of its graph are in range (" + "; ".join(
            f"{r.op} ({r.node}) from {r.low} to {r.high} for size {r.size}" for r in ranges) + ")" if ranges else
            "its graph has no index input")
        return FaultKind.OUT_OF_BOUNDS, (f"{own}: an index out of bounds: its own bounds check "
                                         f"`{check.group(0).strip()}` failed, on an index the kernel computes "
                                         f"itself, while {inputs}")
    return FaultKind.DEVICE_ERROR, own + (f": the device-side assert `{assertion}` failed" if assertion else "")


# Inductor's check on an indirect index: a Triton kernel's `tl.device_assert` (CUDA prints it as the assertion),
# a C++ kernel's `TORCH_CHECK` (the error it raises says it)
_BOUNDS_CHECK = re.compile(r"index out of bounds: [^\n`]*")
# how CUDA prints a failed device-side assert (`__assertfail`: Triton's `tl.device_assert`, ATen's `CUDA_KERNEL_ASSERT`)
_ASSERTION = re.compile(r"Assertion `(.+?)` failed")


def device_assertion(output: str) -> str | None:
    """The first device-side assert a run's output says failed (its message), or None."""
    found = _ASSERTION.search(output)
    return found.group(1) if found else None


def _ranges_words(ranges: Sequence[IndexRange]) -> str:
    said = "; ".join(f"{r.op} ({r.node}) is given indices from {r.low} to {r.high} into a dimension of size {r.size}"
                     for r in ranges)
    return f"an index out of bounds: {said}"


def _nonfinite_kind(event: KernelEvent, ops: Sequence[str]) -> tuple[FaultKind, str]:
    out = _said(event.bad)
    eager = (", where the same ops run eagerly on the same inputs give none" if event.eager == "finite" else
             " (the graph could not be run eagerly beside it to compare)")
    packets = [_packet(op) for op in ops]
    if any(b.nan for b in event.bad):
        makers = [f"{op} ({_NAN_MAKERS[p]})" for op, p in zip(ops, packets) if p in _NAN_MAKERS] or [
            f"{op} ({_NAN_FROM_INF[p]})" for op, p in zip(ops, packets) if p in _NAN_FROM_INF]
        which = f"; of its ops, these can make NaN: {', '.join(makers)}" if makers else ""
        if event.inputs_finite:
            return FaultKind.NAN_FROM_FINITE, f"kernel {event.kernel} made NaN from finite inputs ({out}){eager}{which}"
        return FaultKind.NAN_FROM_FINITE, f"kernel {event.kernel} made NaN ({out}){eager}{which}"
    low = any(b.dtype in _LOW_PRECISION for b in event.bad)
    makers = [op for op, p in zip(ops, packets) if p in _OVERFLOW_MAKERS]
    precision = (" eager computes these ops in float32 and rounds once; the kernel keeps the low-precision type "
                 "in between" if low else "")
    which = f"; of its ops, these can overflow: {', '.join(makers)}" if makers else ""
    return FaultKind.OVERFLOW, (f"kernel {event.kernel} overflowed to Inf ({out}){eager}: an overflow eager "
                                f"avoids{';' + precision if precision else ''}{which}")


def _said(bad: Sequence[BadTensor]) -> str:
    return "; ".join(f"{b.nan} NaN, {b.posinf + b.neginf} Inf in argument {b.arg}, {b.dtype}{list(b.shape)}"
                     for b in bad)


# memcheck's error headers: an invalid access (its space, operation and size), a misaligned address, a failed assert
_SANITIZER_ERROR = re.compile(r"^=+\s+(?:(?P<access>Invalid (?:__(?P<space>\w+)__ )?(?P<op>read|write|atomic)\w* "
                              r"of size (?P<size>\d+) bytes?)|(?P<misaligned>Misaligned [\w ]*?address)"
                              r"|(?P<assert>(?:Warp|Device-side) assert))", re.M | re.I)
# where the error happened: `at KERNEL+0x1e0 in FILE.py:29` (CUDA 12.4 on), `at 0x50 in FILE.py:29:KERNEL` (older),
# `at void at::native::kernel<4, ...>(...)+0x1e0` (a C++ kernel, no line info)
_SANITIZER_AT = re.compile(r"^=+\s+at (?:0x[0-9a-f]+ in (?P<old_source>\S+:\d+):(?P<old_kernel>.+)"
                           r"|(?P<kernel>.+?)(?:\+0x[0-9a-f]+)?(?: in (?P<source>\S+:\d+))?)\s*$", re.M)
_SANITIZER_NEAR = re.compile(r"is ([\d,]+) bytes (before|after) the nearest allocation at \S+ of size ([\d,]+) bytes")
_SANITIZER_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) errors?")
_SANITIZER_THREAD = re.compile(r"by thread \(([\d,]+)\) in block \(([\d,]+)\)")
_MEMCHECK = "compute-sanitizer (memcheck)"


def sanitizer_finding(output: str) -> SanitizerFinding:
    """compute-sanitizer memcheck's first error: an invalid or misaligned access (the kernel, the access and its
    size, where it fell against the nearest allocation); a device-side assert (its message, the thread); or that it
    found none."""
    first, summary = _SANITIZER_ERROR.search(output), _SANITIZER_SUMMARY.search(output)
    errors = int(summary.group(1)) if summary else None
    if first is None:
        if summary is None:  # it said nothing of memory: what it said last is all there is to go on
            last = next((line.strip() for line in reversed(output.splitlines()) if line.strip()), "")
            return SanitizerFinding("nothing", f"{_MEMCHECK} ended without its error summary, so it found nothing "
                                               "to name" + (f" (its last line: {last[:200]!r})" if last else
                                                            " (it printed nothing)"))
        return SanitizerFinding("errors" if errors else "nothing",
                                f"{_MEMCHECK} reported {errors} memory error(s)", errors=errors)
    following = _SANITIZER_ERROR.search(output, first.end())  # the first error's own lines: up to the next error
    block = output[first.end():following.start() if following else len(output)]
    if first.group("assert"):
        thread, assertion = _SANITIZER_THREAD.search(block), device_assertion(output)
        return SanitizerFinding("assert", f"{_MEMCHECK}: a failed device-side assert"
                                + (f" `{assertion}`" if assertion else "")
                                + (f" by thread ({thread.group(1)}) in block ({thread.group(2)})" if thread else "")
                                + ", not a bad memory access" + (f" ({errors} error(s) in all)" if summary else ""),
                                errors=errors)
    at, near = _SANITIZER_AT.search(block), _SANITIZER_NEAR.search(block)
    operation, size = (first.group("op") or "misaligned").lower(), int(first.group("size") or 0)
    error = (f"an invalid {first.group('space') + ' ' if first.group('space') else ''}{operation} of {size} bytes"
             if first.group("access") else f"a {first.group('misaligned').lower()}")
    kernel = (at.group("kernel") or at.group("old_kernel") or "").strip() if at else ""
    source = (at.group("source") or at.group("old_source") or "") if at else ""
    return _worded(SanitizerFinding("access", "", error=error, kernel=kernel, operation=operation, size=size,
                                    source=source, errors=errors,
                                    allocation=(f"{near.group(1)} bytes {near.group(2)} an allocation of "
                                                f"{near.group(3)} bytes" if near else "")))


def with_code(finding: SanitizerFinding, code: str) -> SanitizerFinding:
    """The finding with the kernel's source line at `finding.source` (read where the run compiled it)."""
    return _worded(msgspec.structs.replace(finding, code=code)) if code else finding


def _worded(found: SanitizerFinding) -> SanitizerFinding:
    """An access finding with its words made from its fields."""
    return msgspec.structs.replace(found, words=f"{_MEMCHECK}: {_access_words(found)}")


def _access_words(found: SanitizerFinding) -> str:
    return (found.error + (f" in kernel {found.kernel}" if found.kernel else "")
            + (f" (at {found.source} of its source{f': `{found.code}`' if found.code else ''})" if found.source
               else "")
            + (f", {found.allocation}" if found.allocation else ""))


def with_sanitizer(fault: KernelFault, finding: SanitizerFinding) -> KernelFault:
    """The checked run's fault, with what compute-sanitizer found in a run of its own: an invalid access in the
    same kernel confirms it (a kernel error is then a bad access: an address outside its buffers, not an
    assert), one in another kernel is said beside it, for the reader to weigh; nothing else changes it."""
    if finding.said != "access":
        return fault
    if finding.kernel != fault.kernel:
        return msgspec.structs.replace(fault, words=f"{fault.words}; compute-sanitizer, in a run of its own, found "
                                                    f"the first invalid access in another kernel ({finding.words})")
    kind = FaultKind.BAD_ACCESS if fault.kind is FaultKind.DEVICE_ERROR else fault.kind
    return msgspec.structs.replace(fault, kind=kind, words=f"{fault.words}; compute-sanitizer, in a run of its own, "
                                                           f"agrees: {_access_words(finding)}")


def sanitizer_fault(compiled: Sequence[CompiledKernels], finding: SanitizerFinding) -> KernelFault | None:
    """The fault compute-sanitizer alone found, where the checked run saw none (a wrong result with finite
    values, a crash it did not place): its invalid access, when in a kernel Inductor compiled (a name several
    graphs hold is said; the first graph's is taken). A write past a buffer is memory corruption; a read or a
    misaligned access, a bad access."""
    if finding.said != "access":
        return None
    graphs = [(c.graph, k) for c in compiled for k in c.kernels if k.name == finding.kernel]
    if not graphs:
        return None
    (graph, kernel), others = graphs[0], [g for g, _ in graphs[1:]]
    writes = finding.operation in ("write", "atomic")
    what = ("it writes outside its buffers: what it overwrites there can change other tensors' values"
            if writes else "it reads outside its buffers" if finding.operation == "read" else
            "its address is not aligned as the access needs")
    same_name = f" (graphs {', '.join([graph, *others])} each have a kernel of that name: {graph}'s is taken)" if (
        others) else ""
    return _fault(graph, kernel, kernel.name, FaultKind.MEMORY_CORRUPTION if writes else FaultKind.BAD_ACCESS,
                  f"compute-sanitizer found {_access_words(finding)}: {what}{same_name}")

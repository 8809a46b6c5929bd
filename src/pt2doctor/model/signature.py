"""Failure signatures: the normalised text that decides whether two failures are "the same".

Contract: `normalize(text)` is idempotent and keeps the exception type and the first line of the
message, with what varies between runs masked (addresses, paths, numbers, temp names), so a
candidate that fails with another message (pytorch#93521: drifting to a different error) does
not match. Exception texts come from the repro script's own `describe_failure` (the worker and a
fresh `python repro.py` describe failures with the same code), so this module needs no torch.
"""

from __future__ import annotations

import re
import signal

from pt2doctor.model.minify import ACCURACY_MESSAGE, ACCURACY_TYPE, FailureKind, FailureSignature

__all__ = ["ACCURACY_MESSAGE", "ACCURACY_TYPE", "FAILURE_MARKER", "accuracy_signature", "from_description",
           "from_exit", "from_signal", "normalize"]
FAILURE_MARKER = "PT2DOCTOR REPRO FAILED: "

_MASKS = (
    (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),
    (re.compile(r"(?:[A-Za-z]:)?(?:/[\w.\-+@]+){2,}/?"), "<path>"),
    (re.compile(r"\b(?:tmp|torchinductor_)\w+"), "<tmp>"),
    # a number is one token whatever its magnitude or form: "max abs diff 1" and "max abs diff 0.7738",
    # "1e-05" and "3.2%" describe the same failure
    (re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w.])"), "N"),
    (re.compile(r"\s+"), " "),
)
_MAX = 200
# A CUDA error is the same failure whichever layer reported it: the runtime (`AcceleratorError: CUDA error: ...`,
# `RuntimeError: CUDA error: ...` before torch 2.8) or a kernel launcher through the driver (Triton's `RuntimeError:
# CUDA driver error: ...`); the same device assert surfaces as either, by when it is noticed
_CUDA_ERROR = re.compile(r"^(?:[\w.]+: )?CUDA (?:driver )?error: ")


def normalize(text: str) -> str:
    """Type and first line of the message, with run-specific parts masked; a CUDA error as the error itself."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    first = lines[0] if lines else ""
    for pattern, replacement in _MASKS:
        first = pattern.sub(replacement, first)
    return _CUDA_ERROR.sub("CUDA error: ", first[:_MAX].strip())


# what shows a line carries values: a masked number, brackets, a comparison, a tensor's repr
_VALUES = re.compile(r"[\[\](){}=<>]|\bN\b|\btensor\b")


def check_identity(text: str) -> str:
    """The identity of a wrong result that the script's own check raised, from its normalised `Type: first
    line`: the type, and the line too when it names no values (`AssertionError: Tensor-likes are not close!`
    says which comparison failed; `Mismatch at N: tensor(...)` says with what, which changes as a program
    shrinks)."""
    name, _, first = text.partition(":")
    return f"{name}: {first.strip()}" if first.strip() and not _VALUES.search(first) else name


def from_description(text: str) -> FailureSignature:
    """Signature of a `Type: message` description written by a repro script."""
    norm = normalize(text)
    kind = FailureKind.ACCURACY if norm.startswith(ACCURACY_TYPE) else FailureKind.EXCEPTION
    return FailureSignature(kind, norm)


def accuracy_signature() -> FailureSignature:
    """The one signature every repro's accuracy check raises (its message names no values)."""
    return from_description(f"{ACCURACY_TYPE}: {ACCURACY_MESSAGE}")


def from_signal(signum: int) -> FailureSignature:
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    return FailureSignature(FailureKind.SIGNAL, name)


def from_exit(returncode: int, output: str) -> FailureSignature | None:
    """Signature of a finished `python repro.py`; None when it exited 0."""
    if returncode < 0:
        return from_signal(-returncode)
    for line in reversed(output.splitlines()):
        if line.startswith(FAILURE_MARKER):
            return from_description(line[len(FAILURE_MARKER):])
    if returncode == 0:
        return None
    return FailureSignature(FailureKind.EXCEPTION, f"exit status {returncode}")

"""Guard failures in plain words: the one place a failed guard becomes a sentence.

Contract: `guard_words(failure, across=...)` is pure and composes the sentence from the facts capture took
from torch's text (`GuardFailure`: kind, subject, dim, expected/actual, condition, origin), one function per
kind of guard (`_WORDS`); it never reads `raw`. `across` names the graph break a value carried across one
crossed (`the graph break at m.py:17 (`t0 = ...`)`) when analysis knows which; otherwise "a graph break".
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pt2doctor.model import GuardFailure, GuardKind

_A_BREAK = "a graph break"


def guard_words(f: GuardFailure, across: str = _A_BREAK) -> str:
    """`f` in plain words, e.g. ``input `x`: size at dim 0 changed 4 -> 5``."""
    return _WORDS.get(f.kind, _other)(f, across)


def _tensor_noun(f: GuardFailure, across: str) -> str:
    if f.origin == "carried":
        return f"a tensor carried across {across}"
    if f.origin in ("parameter", "buffer"):
        return f"{f.origin} `{f.subject}`"
    return f"input `{f.subject}`"


def _change(f: GuardFailure) -> str:
    if f.expected is not None and f.actual is not None:
        return f"{f.expected} -> {f.actual}"
    return f"expected {f.expected}" if f.expected else "changed"


def _size(f: GuardFailure, across: str) -> str:
    return f"{_tensor_noun(f, across)}: size at dim {f.dim} changed {_change(f)}"


def _stride(f: GuardFailure, across: str) -> str:
    return f"{_tensor_noun(f, across)}: became non-contiguous or changed layout (stride at dim {f.dim} changed " \
           f"{_change(f)})"


def _rank(f: GuardFailure, across: str) -> str:
    return f"{_tensor_noun(f, across)}: number of dims changed {_change(f)}"


def _tensor_property(f: GuardFailure, across: str) -> str:
    """dtype, device, requires_grad, dispatch keys: named as torch names the property."""
    return f"{_tensor_noun(f, across)}: {f.kind.value} changed {_change(f)}"


def _value(f: GuardFailure, across: str) -> str:
    """A Python value (or a global) the graph was specialized to; its new value when known."""
    if f.origin == "carried":
        then = f", then {f.actual}" if f.actual is not None else ""
        return (f"a Python value carried across {across} changed: the code resumed after the break was "
                f"specialized to {f.expected}{then}")
    noun = "global" if f.kind is GuardKind.GLOBAL else (
        f"Python {f.value_type}" if f.value_type not in (None, "None", "value") else "Python value")
    if f.actual is not None:
        return f"{noun} `{f.subject}` changed {f.expected} -> {f.actual}"
    return f"{noun} `{f.subject}` changed: the graph was specialized to {f.condition or f'{f.subject} == {f.expected}'}"


def _type(f: GuardFailure, across: str) -> str:
    if f.expected == "tensor":
        now = "None" if f.actual in (None, "NoneType") else f"a {f.actual}"
        return f"`{f.subject}` was a tensor when compiled and is now {now}"
    if f.expected == "function":
        return (f"`{f.subject}` was a Python function when compiled and is now another kind of callable (a builtin, "
                "a functools.partial or a callable object)")
    return f"`{f.subject}` changed type"


def _identity(f: GuardFailure, across: str) -> str:
    if f.subject.endswith(".__code__"):  # a wrapper frame (a decorator) that calls whatever function it wraps
        return (f"`{f.subject.removesuffix('.__code__')}` is a different function than when compiled: another "
                "function or module runs through this same frame")
    return f"`{f.subject}` is a different object than when compiled"


def _attribute(f: GuardFailure, across: str) -> str:
    return f"attribute `{f.subject}` was set or deleted (an object's __dict__ changed)"


def _symbolic(f: GuardFailure, across: str) -> str:
    if f.expected == ">= 2":
        return (f"input `{f.subject}`: size at dim {f.dim} became 0 or 1, but the dynamic graph was compiled for "
                "sizes >= 2 (torch specializes sizes 0 and 1: 0/1 specialization)")
    if f.expected is not None:
        least = f.expected.removeprefix(">= ")
        return f"input `{f.subject}`: size at dim {f.dim} fell below {least}, the least the dynamic graph allows"
    return f"input `{f.subject}`: a dynamic-shape guard failed ({f.condition or f.subject})"


_STATE_NAMES = {
    "grad_mode": "grad mode (torch.no_grad / torch.inference_mode / torch.enable_grad)",
    "deterministic_algorithms": "torch.use_deterministic_algorithms",
    "torch_function": "a torch function mode", "default_dtype": "torch.get_default_dtype()",
    "num_threads": "torch.get_num_threads()", "allow_tf32": "TF32 matmul (torch.backends.cuda.matmul.allow_tf32)",
}
_AUTOCAST = re.compile(r"autocast(?:\((?P<device>\w+)\))?(?:_enabled)?$")


def _global_state(f: GuardFailure, across: str) -> str:
    return f"torch's global state differs from when compiled: {', '.join(map(_state_name, f.subject.split(', ')))}"


def _state_name(flag: str) -> str:
    autocast = _AUTOCAST.match(flag)
    if autocast:
        return f"autocast on {autocast['device']} (on/off)" if autocast["device"] else "autocast (on/off)"
    return _STATE_NAMES.get(flag, flag)


def _other(f: GuardFailure, across: str) -> str:
    return f"guard failed: {f.condition or f.subject}"


_WORDS: dict[GuardKind, Callable[[GuardFailure, str], str]] = {
    GuardKind.SIZE: _size, GuardKind.STRIDE: _stride, GuardKind.RANK: _rank,
    GuardKind.DTYPE: _tensor_property, GuardKind.DEVICE: _tensor_property, GuardKind.REQUIRES_GRAD: _tensor_property,
    GuardKind.DISPATCH_KEYS: _tensor_property, GuardKind.VALUE: _value, GuardKind.GLOBAL: _value,
    GuardKind.TYPE: _type, GuardKind.IDENTITY: _identity, GuardKind.ATTRIBUTE: _attribute,
    GuardKind.SYMBOLIC: _symbolic, GuardKind.GLOBAL_STATE: _global_state, GuardKind.OTHER: _other,
}

"""JSON for model values: one msgspec codec for `Session` and friends.

Contract: `dumps(value)` and `loads(data, type)` round-trip every model value; `CompileId` is written
as its text form (`"0/1"`), enums as their values. Unknown keys are ignored on load so newer
session files stay readable by older readers where the meaning did not change.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from pt2doctor.model.ids import CompileId

T = TypeVar("T")


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, CompileId):
        return str(obj)
    raise NotImplementedError(f"cannot serialize {type(obj).__name__}")


def _dec_hook(kind: type, obj: Any) -> Any:
    if kind is CompileId and isinstance(obj, str):
        return CompileId.parse(obj)
    raise NotImplementedError(f"cannot deserialize {kind.__name__}")


_ENCODER = msgspec.json.Encoder(enc_hook=_enc_hook)


def dumps(value: Any, *, pretty: bool = False) -> bytes:
    data = _ENCODER.encode(value)
    return msgspec.json.format(data, indent=2) if pretty else data


def loads(data: bytes | str, kind: type[T]) -> T:
    return msgspec.json.decode(data, type=kind, dec_hook=_dec_hook)


def to_builtins(value: Any) -> Any:
    return msgspec.to_builtins(value, enc_hook=_enc_hook)


def convert(obj: Any, kind: type[T]) -> T:
    return msgspec.convert(obj, type=kind, dec_hook=_dec_hook)

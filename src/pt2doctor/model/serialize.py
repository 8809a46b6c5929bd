"""JSON for model values: one msgspec codec for `Session` and friends.

Contract: `dumps(value)` and `loads(data, type)` round-trip every model value; `CompileId` is written
as its text form (`"0/1"`), enums as their values. Unknown keys are ignored on load so newer
session files stay readable by older readers where the meaning did not change. Records that cross
a process boundary go through here too: `write_record(path, value)` replaces a file atomically,
`append_line`/`read_lines` keep one record per line (JSON lines); a line that is not a valid record
raises `RecordError` naming the file and the line, never a bare KeyError later.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Any, TypeVar

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


class RecordError(ValueError):
    """A record file (or one line of it) that does not decode as the record it should hold."""


def write_record(path: Path, value: Any) -> None:
    """`value` encoded into `path`, atomically: a reader sees the old file or the whole new one."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(dumps(value))
    os.replace(tmp, path)


def read_record(path: Path, kind: type[T]) -> T:
    try:
        return loads(path.read_bytes(), kind)
    except msgspec.DecodeError as exc:  # ValidationError is one
        raise RecordError(f"{path}: not a {kind.__name__} record: {exc}") from exc


def append_line(handle: IO[str], value: Any) -> None:
    handle.write(_ENCODER.encode(value).decode() + "\n")


def read_lines(path: Path, kind: type[T]) -> list[T]:
    """Every record of a JSON-lines file (none when it does not exist); blank lines are skipped."""
    if not path.exists():
        return []
    out = []
    for number, line in enumerate(path.read_bytes().splitlines(), 1):
        if line.strip():
            try:
                out.append(loads(line, kind))
            except msgspec.DecodeError as exc:
                raise RecordError(f"{path}, line {number}: not a {kind.__name__} record: {exc}") from exc
    return out

"""The messages between the worker pool (`processes.pool`) and its workers (`processes.zygote`, `forks`,
`servers`): typed values, length-prefixed msgpack on a pipe.

Contract: to a worker, `RunJob` (a candidate script, its timeout and the file it will be written as: its
`__file__`), `Cancel` (jobs whose answers are no longer wanted: one not started never is; a running one is ended
where its worker can end it alone, a forked child, else left to answer, and that answer is dropped) or `Quit`; from
a worker, `Ready` once warm (or `StartFailed` with why, and it exits), then
one `Answer` per job. `Answer.status` is `ok`, `failed` (text: the script's `describe_failure`),
`signal` (text: the number), `timeout` or `error` (a worker-side problem, never a match). `send`
writes one message whole; `MessageReader` decodes them from a non-blocking source as bytes arrive.
"""

from __future__ import annotations

import os
import struct
from typing import Literal

import msgspec

Status = Literal["ok", "failed", "signal", "timeout", "error"]


class RunJob(msgspec.Struct, frozen=True, tag=True):
    job: int
    script: str
    timeout_s: float
    repro_file: str


class Cancel(msgspec.Struct, frozen=True, tag=True):
    jobs: tuple[int, ...]


class Quit(msgspec.Struct, frozen=True, tag=True):
    pass


class Ready(msgspec.Struct, frozen=True, tag=True):
    pass


class StartFailed(msgspec.Struct, frozen=True, tag=True):
    why: str


class Answer(msgspec.Struct, frozen=True, tag=True):
    job: int
    status: Status
    text: str = ""
    last: bool = False  # a server's: it exits after this answer and takes no other job


Message = RunJob | Cancel | Quit | Ready | StartFailed | Answer

_HEADER = struct.Struct("!I")
_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(Message)


def encode(message: Message) -> bytes:
    data = _ENCODER.encode(message)
    return _HEADER.pack(len(data)) + data


def send(fd: int, message: Message) -> None:
    view = memoryview(encode(message))
    while view:
        view = view[os.write(fd, view):]


class MessageReader:
    """Incremental decoder of length-prefixed messages read from a non-blocking source."""

    def __init__(self) -> None:
        self.buffer = b""

    def feed(self, data: bytes) -> list[Message]:
        self.buffer += data
        out: list[Message] = []
        while len(self.buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self.buffer)
            if len(self.buffer) < _HEADER.size + size:
                break
            out.append(_DECODER.decode(self.buffer[_HEADER.size:_HEADER.size + size]))
            self.buffer = self.buffer[_HEADER.size + size:]
        return out


def ended(job: int, code: int) -> Answer:
    """The answer for a worker process that ended (`processes.group.exit_code`) without answering."""
    return Answer(job, "signal", str(-code)) if code < 0 else Answer(job, "error", f"exit status {code}")

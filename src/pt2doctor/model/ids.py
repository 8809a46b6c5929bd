"""Value types that identify things in a compilation: `CompileId` and `SourceLoc`.

Contract: pure values, hashable and ordered, with a stable text form. `CompileId` prints like
torch's own logs and tlparse (`0/1`, `0/1_2` for a restarted attempt, `!0/0/1` for a frame compiled
under compiled autograd `!0`) and parses back from it.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_COMPILE_ID = re.compile(r"^\[?(?:!(?P<ca>\d+)/)?(?P<frame>-?\d+)/(?P<fcid>-?\d+)(?:_(?P<attempt>\d+))?\]?$")


@functools.total_ordering
class CompileId:
    """Which frame (the n-th code object Dynamo saw) and which compile of that frame; `autograd` is the
    compiled-autograd graph it belongs to (torch's `compiled_autograd_id`), None for an ordinary one, so
    `!0/0/0` and `0/0` never collide.

    A plain slotted class rather than a dataclass so that serializers write its text form.
    """

    __slots__ = ("frame", "frame_compile", "attempt", "autograd")
    frame: int
    frame_compile: int
    attempt: int
    autograd: int | None

    def __init__(self, frame: int, frame_compile: int, attempt: int = 0, autograd: int | None = None) -> None:
        object.__setattr__(self, "frame", frame)
        object.__setattr__(self, "frame_compile", frame_compile)
        object.__setattr__(self, "attempt", attempt)
        object.__setattr__(self, "autograd", autograd)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("CompileId is immutable")

    def _key(self) -> tuple[int, int, int, int]:
        return (-1 if self.autograd is None else self.autograd, self.frame, self.frame_compile, self.attempt)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CompileId) and self._key() == other._key()

    def __lt__(self, other: CompileId) -> bool:
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"CompileId({self})"

    def __str__(self) -> str:
        base = f"{self.frame}/{self.frame_compile}" + (f"_{self.attempt}" if self.attempt else "")
        return base if self.autograd is None else f"!{self.autograd}/{base}"

    @property
    def is_recompile(self) -> bool:
        return self.frame_compile > 0

    @classmethod
    def parse(cls, text: str) -> CompileId:
        match = _COMPILE_ID.match(text.strip())
        if match is None:
            raise ValueError(f"not a compile id: {text!r}")
        autograd = int(match["ca"]) if match["ca"] is not None else None
        return cls(int(match["frame"]), int(match["fcid"]), int(match["attempt"] or 0), autograd)

    @property
    def compile(self) -> CompileId:
        """This compile of the frame, whatever the attempt (`0/1_2` -> `0/1`)."""
        return CompileId(self.frame, self.frame_compile, 0, self.autograd)


@dataclass(frozen=True, slots=True, order=True)
class SourceLoc:
    """A line of user source: where a break, a guard or a failure points to."""

    file: str
    line: int
    function: str = ""
    code: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

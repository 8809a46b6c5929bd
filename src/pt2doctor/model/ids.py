"""Value types that identify things in a compilation: `CompileId` and `SourceLoc`.

Contract: pure values, hashable and ordered, with a stable text form. `CompileId` prints like
torch's own logs and tlparse (`0/1`, `0/1_2` for a restarted attempt, `!0/0/1` for a frame compiled
under compiled autograd `!0`), with `@N` after it for a compile after the N-th `torch._dynamo.reset()`
(`0/1@2`), and parses back from it.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

# The artifact the child logs into the trace at each `torch._dynamo.reset()` (`CompileId.generation`).
RESET_ARTIFACT = "pt2doctor_dynamo_reset"
_COMPILE_ID = re.compile(
    r"^\[?(?:!(?P<ca>\d+)/)?(?P<frame>-?\d+)/(?P<fcid>-?\d+)(?:_(?P<attempt>\d+))?(?:@(?P<gen>\d+))?\]?$")


@functools.total_ordering
class CompileId:
    """Which frame (the n-th code object Dynamo saw) and which compile of that frame; `autograd` is the
    compiled-autograd graph it belongs to (torch's `compiled_autograd_id`), None for an ordinary one, so
    `!0/0/0` and `0/0` never collide.

    `generation` makes the id unique in a process (issue #30): `torch._dynamo.reset()` restarts Dynamo's
    counters, so torch names the first compile after a reset `0/0` again; the generation counts the resets
    before the compile, so that one is `0/0@1` here, and every record, file and directory named after a
    compile id (call counts, the graph recording, `diagnose`'s per-graph runs) keeps the two apart. In the
    child, the reset is seen as it happens (`torch_compat.count_dynamo_resets`, which also marks it in the
    trace); a trace reader counts those marks, or, in a trace pt2doctor did not write, a compile id that
    starts a second time (`capture.trace.trace_reader`). Both place a backward graph compiled lazily after
    a reset (the `backward()` of an output computed before it) in the new generation: neither can tell.
    `torch_text` is torch's own id, without the generation. Two more things share a torch id and need
    nothing here: the ranks of a job (one process, one trace file and one session each) and a forward
    graph and its backward (one Dynamo graph, one compile: the graph recording names each graph on its own,
    `g0003`, with the compile it belongs to, and `diagnose` runs one experiment per compile).

    A plain slotted class rather than a dataclass so that serializers write its text form; a session
    written before generations existed reads back as generation 0, its text unchanged.
    """

    __slots__ = ("frame", "frame_compile", "attempt", "autograd", "generation")
    frame: int
    frame_compile: int
    attempt: int
    autograd: int | None
    generation: int

    def __init__(self, frame: int, frame_compile: int, attempt: int = 0, autograd: int | None = None,
                 generation: int = 0) -> None:
        object.__setattr__(self, "frame", frame)
        object.__setattr__(self, "frame_compile", frame_compile)
        object.__setattr__(self, "attempt", attempt)
        object.__setattr__(self, "autograd", autograd)
        object.__setattr__(self, "generation", generation)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("CompileId is immutable")

    def _key(self) -> tuple[int, int, int, int, int]:
        return (self.generation, -1 if self.autograd is None else self.autograd, self.frame, self.frame_compile,
                self.attempt)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CompileId) and self._key() == other._key()

    def __lt__(self, other: CompileId) -> bool:
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"CompileId({self})"

    def __str__(self) -> str:
        return self.torch_text + (f"@{self.generation}" if self.generation else "")

    @property
    def torch_text(self) -> str:
        """The id as torch prints it (`0/1_2`, `!0/0/1`): not unique across a `torch._dynamo.reset()`."""
        base = f"{self.frame}/{self.frame_compile}" + (f"_{self.attempt}" if self.attempt else "")
        return base if self.autograd is None else f"!{self.autograd}/{base}"

    @property
    def frame_key(self) -> tuple[int, int]:
        """Which frame, unique in a process: frame ids restart at a reset too."""
        return (self.generation, self.frame)

    @property
    def is_recompile(self) -> bool:
        return self.frame_compile > 0

    def in_generation(self, generation: int) -> CompileId:
        """This id as read from torch (generation 0) placed after `generation` resets."""
        return CompileId(self.frame, self.frame_compile, self.attempt, self.autograd, generation)

    @classmethod
    def parse(cls, text: str) -> CompileId:
        match = _COMPILE_ID.match(text.strip())
        if match is None:
            raise ValueError(f"not a compile id: {text!r}")
        autograd = int(match["ca"]) if match["ca"] is not None else None
        return cls(int(match["frame"]), int(match["fcid"]), int(match["attempt"] or 0), autograd,
                   int(match["gen"] or 0))

    @property
    def compile(self) -> CompileId:
        """This compile of the frame, whatever the attempt (`0/1_2` -> `0/1`, `0/1_2@1` -> `0/1@1`)."""
        return CompileId(self.frame, self.frame_compile, 0, self.autograd, self.generation)


@dataclass(frozen=True, slots=True, order=True)
class SourceLoc:
    """A line of user source: where a break, a guard or a failure points to."""

    file: str
    line: int
    function: str = ""
    code: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

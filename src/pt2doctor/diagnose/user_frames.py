"""Where in the user's code the failure is: the frames Dynamo was tracing, the failing line, the compiler's hint.

Contract: `where(found)` sets `found.user_frames` (innermost first) from the failure the session diagnosed, and at the
Dynamo stage `found.hint` (the fatal graph break's hint from torch); `traced_frames(message)` reads the lines of the
user's code out of Dynamo's "from user code:" block. Reads only what the runs recorded: no runs, no I/O.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pt2doctor.capture.process_meta import is_user_file
from pt2doctor.model import SourceLoc
from pt2doctor.model.diagnosis import FailingStage

if TYPE_CHECKING:
    from pt2doctor.diagnose.found import Found


def where(found: Found) -> None:
    session = found.session
    if session is None or not session.failures:
        return
    failure = session.failures[0]
    frames = traced_frames(failure.message) + list(failure.user_frames)
    if failure.file and failure.line and (failure.file, failure.line) not in {(f.file, f.line) for f in frames}:
        frames.insert(0, SourceLoc(failure.file, failure.line))
    found.user_frames = frames
    fatal = next((b for b in session.graph_breaks if b.fatal),
                 session.graph_breaks[0] if session.graph_breaks else None)
    if fatal is not None and found.stage is FailingStage.DYNAMO:
        found.hint = next((h for h in fatal.hints), "")
        if not frames:
            found.user_frames = [SourceLoc(fatal.file, fatal.line, fatal.function, fatal.code)]


_USER_CODE = re.compile(r'File "([^"]+)", line (\d+)')


def traced_frames(message: str) -> list[SourceLoc]:
    """The lines Dynamo was tracing when it failed (the "from user code:" block of its message), innermost first."""
    _, marker, block = message.partition("from user code:")
    if not marker:
        return []
    frames = [SourceLoc(f, int(n)) for f, n in _USER_CODE.findall(block.split("\n\n")[0])]
    return [f for f in reversed(frames) if is_user_file(f.file)]

"""How a diagnosis ended: the one fact its headline and next steps are said from.

Contract: the step that concludes sets `Found.ending` to one of these values, once (a restart from the plain runs,
or a failure that did not repeat, clears it); nothing else is written for the words. `diagnose.conclusions.said`
turns the ending, the verdict and what the steps returned (`diagnose.reported.Reported`) into a `Said` each time the
diagnosis is frozen, so the words always agree with the facts, a partial diagnosis's included.
"""

from __future__ import annotations

from dataclasses import dataclass

from pt2doctor.model.diagnosis import Attempt, Control


@dataclass(frozen=True)
class Unparsed:
    """The script does not parse: nothing was run."""

    message: str
    line: int


@dataclass(frozen=True)
class GpuHeld:
    """Two runs ran out of GPU memory that other processes held (`analysis.gpu_memory`), in words: not diagnosed."""

    held: str


@dataclass(frozen=True)
class NothingFails:
    """Both runs passed."""


@dataclass(frozen=True)
class Flaky:
    """The same command ended two ways: `first` and `second` are the two runs that differ."""

    first: Attempt
    second: Attempt


@dataclass(frozen=True)
class FailsUncompiled:
    """The script fails with compilation off too (`off`): its own bug."""

    off: Attempt


@dataclass(frozen=True)
class EnvironmentFails:
    """The one-op program of the failing kind fails the same way on this machine (`diagnose.control`)."""

    control: Control


@dataclass(frozen=True)
class Exported:
    """The export path concluded on its finding (`export.diagnose`, the finding in `Reported.export`)."""


@dataclass(frozen=True)
class Diagnosed:
    """The procedure concluded on its verdict and hand-over; `cut_short`: its --budget ran out first, and it concluded
    on what it had found by then."""

    cut_short: bool = False


Ending = Unparsed | GpuHeld | NothingFails | Flaky | FailsUncompiled | EnvironmentFails | Exported | Diagnosed


@dataclass(frozen=True)
class Said:
    """The words of a diagnosis: its headline, its next steps (what to do first, first), and the notes the words
    add (the workarounds that did not hold)."""

    headline: str = ""
    next_steps: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

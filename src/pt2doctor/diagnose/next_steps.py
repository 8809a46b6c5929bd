"""The hand-over's next steps: the verified workaround with its cost, and what the reduced program shows.

Contract: `workaround_steps(found, workarounds)` puts the verified workarounds first among `found.next_steps` (an
upgrade of torch, verified on the repro, then the change to the script `model.diagnosis.handed_over` picks) and notes
the ones that did not hold; `program_steps(found)` says what the reduced program (repro.py when no graph repro
verified) shows and how to file it. Text only: they read what the steps established.
"""

from __future__ import annotations

from typing import Protocol

from pt2doctor.model.diagnosis import ProgramRepro, Workaround, handed_over, verified_upgrade
from pt2doctor.model.minify import MinifyResult


class _Established(Protocol):
    """What these read and write of `diagnose.found.Found` (`diagnose.conclusions` calls them: no import back)."""

    next_steps: list[str]
    notes: list[str]
    program: ProgramRepro | None
    minify: MinifyResult | None


def workaround_steps(found: _Established, workarounds: tuple[Workaround, ...]) -> None:
    """The verified workarounds first among the next steps: an upgrade of torch (verified on the repro), then the
    change to the script handed over (`handed_over`), with what it costs; the ones that did not hold after."""
    shown = [w for w in (verified_upgrade(workarounds), handed_over(workarounds)) if w is not None]
    for w in reversed(shown):
        found.next_steps.insert(0, _verified_step(w))
    for w in workarounds:
        if not w.verified:
            found.notes.append(f"workaround tried and not kept: {w.change}: {w.outcome}")


def _verified_step(w: Workaround) -> str:
    if w.verified_on == "repro":
        return f"Workaround, verified on the repro (not on your whole program): {w.change}; {w.outcome}."
    took = f"; what it costs: {w.cost.describe()}" if w.cost else ""
    kept = f"; {w.graphs_kept_compiled} graph(s) stay compiled by your backend" if w.graphs_kept_compiled else ""
    return f"Workaround, verified on a copy of your script: {w.change}{kept}{took}. The patch is workaround.patch."


def program_steps(found: _Established) -> None:
    """What the reduced program (repro.py when no graph repro verified) shows, and what to do with it."""
    p = found.program
    if p is None or (found.minify is not None and found.minify.verified):
        return
    where = "in the code it exports" if p.reason == "export" else "in compiled code"
    calls = f", calling {', '.join(p.culprit_ops)} {where}" if p.culprit_ops else ""
    if p.changes:  # a stale result: what the compiled code read changed, and no guard saw it
        written = "; ".join(f"`{c.statement}` writes {c.path}" for c in p.changes)
        calls = (f": between two calls of the compiled code, {written}, and the second call returns what the state "
                 "before gave (no guard checks it)")
    if not p.verified:
        found.next_steps.append(f"repro.py is your program reduced to {p.lines_after} lines{calls}, but it did not "
                                "verify in a fresh interpreter: check it before filing.")
        return
    how = (f" (backend={p.backend!r} in its torch.compile calls)" if p.backend_in_source else
           f" when compiled with backend={p.backend!r}" if p.backend else "")
    passes = f" and passes {p.passes_with}" if p.passes_with else ""
    test = "; test_repro.py is the same as a regression test in PyTorch's idiom" if p.test else ""
    found.next_steps.append(f"File issue.md with repro.py: your program reduced from {p.lines_before} to "
                            f"{p.lines_after} lines{calls}; `python repro.py` fails the same way{how}{passes} "
                            f"(verified in fresh interpreters){test}.")

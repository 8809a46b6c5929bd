"""The hand-over's next steps: the verified workaround with its cost, and what the reduced program shows.

Contract: pure text, called by `diagnose.conclusions.said`. `workaround_steps(workarounds)` is the verified workarounds'
steps, to come first (an upgrade of torch, verified on the repro, then the change to the script
`model.diagnosis.handed_over` picks), with a note for each one that did not hold; `program_steps(program, minify)`
says what the reduced program (repro.py when no graph repro verified) shows and how to file it.
"""

from __future__ import annotations

from pt2doctor.model.diagnosis import ProgramRepro, Workaround, handed_over, verified_upgrade
from pt2doctor.model.minify import MinifyResult


def workaround_steps(workarounds: tuple[Workaround, ...]) -> tuple[list[str], list[str]]:
    """The verified workarounds' steps, in the order to try them (an upgrade of torch, verified on the repro, then the
    change to the script handed over, `handed_over`, with what it costs), and a note for each one that did not
    hold."""
    shown = [w for w in (verified_upgrade(workarounds), handed_over(workarounds)) if w is not None]
    notes = [f"workaround tried and not kept: {w.change}: {w.outcome}" for w in workarounds if not w.verified]
    return [_verified_step(w) for w in shown], notes


def _verified_step(w: Workaround) -> str:
    if w.verified_on == "repro":
        return f"Workaround, verified on the repro (not on your whole program): {w.change}; {w.outcome}."
    took = f"; what it costs: {w.cost.describe()}" if w.cost else ""
    kept = f"; {w.graphs_kept_compiled} graph(s) stay compiled by your backend" if w.graphs_kept_compiled else ""
    return f"Workaround, verified on a copy of your script: {w.change}{kept}{took}. The patch is workaround.patch."


def program_steps(p: ProgramRepro | None, minify: MinifyResult | None) -> list[str]:
    """What the reduced program (repro.py when no graph repro verified) shows, and what to do with it."""
    if p is None or (minify is not None and minify.verified):
        return []
    where = "in the code it exports" if p.reason == "export" else "in compiled code"
    calls = f", calling {', '.join(p.culprit_ops)} {where}" if p.culprit_ops else ""
    if p.changes:  # a stale result: what the compiled code read changed, and no guard saw it
        written = "; ".join(f"`{c.statement}` writes {c.path}" for c in p.changes)
        calls = (f": between two calls of the compiled code, {written}, and the second call returns what the state "
                 "before gave (no guard checks it)")
    if not p.verified:
        return [f"repro.py is your program reduced to {p.lines_after} lines{calls}, but it did not verify in a fresh "
                "interpreter: check it before filing."]
    how = (f" (backend={p.backend!r} in its torch.compile calls)" if p.backend_in_source else
           f" when compiled with backend={p.backend!r}" if p.backend else "")
    passes = f" and passes {p.passes_with}" if p.passes_with else ""
    test = "; test_repro.py is the same as a regression test in PyTorch's idiom" if p.test else ""
    return [f"File issue.md with repro.py: your program reduced from {p.lines_before} to {p.lines_after} lines{calls}; "
            f"`python repro.py` fails the same way{how}{passes} (verified in fresh interpreters){test}."]

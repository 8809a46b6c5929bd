"""A different failure is not the same failure: when the program cannot run without the compiler.

Contract: `needs_the_compiler(found, compiled)` is called once the stage ladder has run
(`diagnose.procedure`, step 3). It compares the failure signature of every stage run with the compiled
run's (`compiled`, the failure being diagnosed). When every reference run below the original backend
that failed did so otherwise, and either
- for want of a resource (`analysis.failures.resource_shortage`: out of memory, killed), while the compiled run
  fails for what it computes: the lower rungs could not run the program at all; or
- the compiled run failed compiling (`backend_failure`, `kernel_failure`: the backend raised, whether the script
  caught it and exited or not): no run without that backend can show that failure, and what they show instead (a
  script whose reference path fails on its own, past the compile) is the program's (pytorch#145208: eager
  flex_attention leaves a captured scalar's grad None, the compiled backward fails lowering);
the lower rungs say nothing about where the compiled failure is. Then the `NeedsCompiler` it returns says so
(None where it does not apply), the blame goes to the original backend's own stage, and the diagnosis goes on
with the compiled program (runtime triage, minifying its Inductor graph) instead of concluding `user_error`.
No runs, no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pt2doctor.analysis.failures import resource_shortage
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.stages import ladder
from pt2doctor.model.category_policy import policy
from pt2doctor.model.diagnosis import Attempt
from pt2doctor.model.runtime import NeedsCompiler

if TYPE_CHECKING:
    from pt2doctor.diagnose.reproduce import Classified
    from pt2doctor.diagnose.step import Context


def compare_stage_signatures(ctx: Context, found: Found, classify: Classified) -> NeedsCompiler | None:
    """The step (`diagnose.procedure`, right after the stage ladder): the failing run of `classify` is compared."""
    return needs_the_compiler(found, classify.attempt)


def needs_the_compiler(found: Found, compiled: Attempt) -> NeedsCompiler | None:
    rungs = ladder(found.original_backend)
    below = {backend for backend, _ in rungs[:-1]}
    failed = [a for a in found.attempts if a.backend in below and a.outcome == "fail" and a.label != compiled.label]
    if not failed or not compiled.signature or resource_shortage(compiled.signature):
        return None
    shortages = [resource_shortage(a.signature or "") for a in failed]
    short = all(shortages)
    compile_failure = policy(compiled.category).compiler_raised
    if any(a.signature == compiled.signature for a in failed) or not (short or compile_failure):
        return None
    needs = NeedsCompiler(compiled.signature, tuple((a.label, a.signature or a.error) for a in failed),
                          (shortages[0] or "") if short else "", compile_failure=not short)
    found.notes.append(needs.describe())
    top, stage = rungs[-1]
    found.stage = stage
    found.stages = {backend: ("fail" if backend == top else found.stages.get(backend, "skipped"))
                    for backend, _ in rungs}
    return needs

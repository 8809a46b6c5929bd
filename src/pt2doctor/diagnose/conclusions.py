"""How a diagnosis concludes, and how what it established is said.

Contract: the ending functions (`gpu_held`, `success`, `flaky`, `user_error`, `environment_fails`, `conclude`, and
`stopped` for a stop) set what a conclusion settles (the category, the stage, flakiness) and `found.ending`
(`diagnose.endings`); `refine_category` refines the category by the stage as the steps go. `said(found, reported,
pending)` is the one place the words are made, each time the diagnosis is frozen (`diagnose.frozen`): the headline and
the next steps of its ending (while steps are `pending` and nothing has ended it, the verdict so far), the verified
workarounds first and the runtime triage's kernel next, then the ending's own steps and what the reduced program and
the bisector showed; a stop says how far it got. No runs, no I/O.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pt2doctor.analysis.failures import first_message_line
from pt2doctor.analysis.gpu_memory import HeldMemory
from pt2doctor.analysis.recompiles import recompile_chains
from pt2doctor.diagnose import next_steps
from pt2doctor.diagnose.endings import (
    Diagnosed,
    Ending,
    EnvironmentFails,
    Exported,
    FailsUncompiled,
    Flaky,
    GpuHeld,
    NothingFails,
    Said,
    Unparsed,
)
from pt2doctor.diagnose.reported import Reported
from pt2doctor.diagnose.stages import GRAPH_STAGES, blame, ladder
from pt2doctor.diagnose.stopping import BUDGET
from pt2doctor.diagnose.user_frames import where
from pt2doctor.export.diagnose.verdict import export_said, unchecked_inputs_steps
from pt2doctor.model import Category
from pt2doctor.model.category_policy import refined
from pt2doctor.model.diagnosis import STAGE_TITLES, Attempt, Control, FailingStage
from pt2doctor.model.minify import BackendKind
from pt2doctor.model.runtime import ACCESS_FAULTS, RuntimeTriage

if TYPE_CHECKING:
    from pt2doctor.diagnose.found import Found


def gpu_held(found: Found, held: HeldMemory) -> None:
    """Two runs ran out of GPU memory that other processes held: nothing about the program can be said (not flaky,
    not a failure of its own); said with how much it asked for and how much the others held."""
    found.ending = GpuHeld(held.describe())


def success(found: Found) -> None:
    found.ending = NothingFails()


def flaky(found: Found, a1: Attempt, a2: Attempt) -> None:
    found.flaky = True
    found.category = a1.category or a2.category or Category.UNCLASSIFIED
    found.error = a1.error or a2.error
    found.ending = Flaky(a1, a2)


def user_error(found: Found, off: Attempt) -> None:
    found.category = Category.USER_ERROR
    found.stage = None  # it fails with compilation off: no compiler stage is to blame
    where(found)
    found.ending = FailsUncompiled(off)


def environment_fails(found: Found, control: Control) -> None:
    """The trivial program of the same kind fails the same way on this machine: the environment is at fault,
    not the program. Nothing is minified and no culprit named."""
    found.ending = EnvironmentFails(control)


def conclude(found: Found, cut_short: bool = False) -> None:
    """The procedure's conclusion on its verdict (`cut_short`: at its --budget). A repro that failed in some of its
    verification runs and not in others is a coin toss: the bug is flaky, whatever the two runs of the script showed
    (both failed)."""
    chosen = found.chosen_repro()
    if chosen is not None and chosen.verify_runs is not None and chosen.verify_runs.flaky:
        found.flaky = True
    found.ending = Diagnosed(cut_short)


def stopped(found: Found) -> None:
    """What a stop leaves (Ctrl-C, SIGTERM, SIGHUP, the budget): the stage table of the runs that finished (a stage is
    blamed only when every rung below the failing one passed). A diagnosis stopped at its budget with its verdict
    known, and not concluded yet, concludes on what it found (the hand-over it had time for)."""
    if not found.stages and found.category is not None:
        outcomes = {a.backend: a.outcome for a in found.attempts if a.backend}
        rungs = ladder(found.original_backend)
        outcomes.setdefault(rungs[-1][0], "fail")  # the original run: it failed, that is why we are here
        first_unknown = next((i for i, (b, _) in enumerate(rungs) if b not in outcomes), len(rungs))
        found.stage, found.stages = blame(rungs[:first_unknown], outcomes)
        found.stages.update({b: "skipped" for b, _ in rungs[first_unknown:]})
    if found.stopped_by == BUDGET and found.category is not None and found.stage is not None and found.ending is None:
        refine_category(found)
        conclude(found, cut_short=True)


def refine_category(found: Found) -> None:
    """What the stage says about the category. Called once the stage is known; at the Dynamo stage that
    is after the run with compilation off passed, with `backend='eager'` failing: nothing compiles there,
    so whatever failed is Dynamo's (the graph it built, or its own runtime code raised): `dynamo_internal`,
    not a backend's failure. An exception the script raised itself, that only a compiled run raises,
    means the compiled code computed something else: an accuracy problem found by the script's own check
    (at the Dynamo stage: Dynamo changed what the program computes: a dropped side effect, a stale value,
    a wrong capture)."""
    category = refined(found.category, found.stage)
    if category is found.category:
        return
    found.category = category
    if category is Category.DYNAMO_INTERNAL:
        found.notes.append("the graph fails as it runs even with backend='eager', which compiles nothing, and the "
                           "program passes with compilation off: the error is Dynamo's (the graph it built or its "
                           "own runtime code), not a backend's")
    elif found.stage is FailingStage.DYNAMO:
        found.notes.append("the script's own check fails when compiled, even with backend='eager', and passes with "
                           "compilation off: Dynamo changed what the program computes (a wrong result, treated as "
                           "accuracy at the Dynamo stage)")
    else:
        found.notes.append("the script's own check fails only when compiled by a real backend: treated as accuracy")


def verdict_words(found: Found) -> str | None:
    """`backend_failure in the custom backend: NotImplementedError: ...`, once the verdict is known (the category and
    the stage, the category refined by the stage; at the Dynamo stage only once the run with compilation off told a
    Dynamo bug from the script's own); None before."""
    if found.flaky or found.category is None:
        return None
    if found.category is Category.USER_ERROR and found.stage is None and "compilation_off" in found.timings:
        return f"{Category.USER_ERROR.value}: the script fails with compilation off too: {found.error}"
    if found.stage is None or (found.stage is FailingStage.DYNAMO and "compilation_off" not in found.timings):
        return None
    category = refined(found.category, found.stage)
    return f"{category.value if category else '?'} in {STAGE_TITLES[found.stage]}: {found.error}"


def said(found: Found, reported: Reported, pending: tuple[str, ...] = ()) -> Said:
    """The headline, next steps and notes of the diagnosis as it stands (see the contract)."""
    ending = found.ending
    headline, steps = _ending_words(found, ending, reported) if ending is not None else ("", [])
    last: list[str] = []
    if found.stopped_by:
        headline, last = _stop_words(found, ending, headline)
    elif ending is None:
        headline = (f"pt2doctor's own error in its {found.internal_errors[0]} stopped the diagnosis before its "
                    "conclusion: what was found is in this bundle" if found.internal_errors and not pending
                    else verdict_words(found) or "")
    shown, notes = next_steps.workaround_steps(reported.workarounds)
    after = unchecked_inputs_steps(reported.export) if reported.export is not None else []
    after += next_steps.program_steps(found.program, found.minify)
    if (b := reported.hand_over.bisection) and b.subsystem:
        after.append(f"CompilerBisector: disabling {b.describe()} makes it pass.")
    return Said(headline, (*shown, *_kernel_steps(reported.runtime), *steps, *after, *last), tuple(notes))


def _ending_words(found: Found, ending: Ending, reported: Reported) -> tuple[str, list[str]]:
    """The headline and the ending's own next steps."""
    match ending:
        case Unparsed(message, line):
            return (f"the script does not parse: {message} at {found.command[0]}:{line} (nothing was run)",
                    ["Fix the syntax error, then run pt2doctor diagnose again."])
        case GpuHeld(held):
            return (f"not diagnosed: the GPU's memory was held by other processes in two runs ({held})",
                    ["Run it again once the GPU is free (`nvidia-smi` lists the processes that hold it) or on another "
                     "GPU (CUDA_VISIBLE_DEVICES): the machine's state, not a flaky bug of the program."])
        case NothingFails():
            return _success_words(found)
        case Flaky(a1, a2):
            return _flaky_words(a1, a2, reported.runtime)
        case FailsUncompiled(off):
            same = off.signature == found.attempts[0].signature
            return ("the script fails the same way with compilation turned off: a bug in the script, not in "
                    "torch.compile" if same else
                    f"the script fails with compilation turned off too ({off.error or off.signature}): fix that first",
                    ["Fix the error in the script (it also fails under torch.compiler.set_stance('force_eager'))."])
        case EnvironmentFails(control):
            return (f"the environment, not your program: {control.program} fails the same way on this machine "
                    f"({found.error})",
                    [f"Every program of this kind fails here: `python {control.path}` (one op) shows it. Repair the "
                     "installation (the C++ compiler, Triton, the CUDA driver, torch's build) or run on another "
                     "machine, then run pt2doctor diagnose again.",
                     "Do not file your program as a PyTorch bug: a report would need the environment's failure, not "
                     "your code."])
        case Exported() if reported.export is not None:
            headline, steps = export_said(found.category, found.error, reported.export)
            return headline, steps
        case _:
            return _concluded_words(found, reported)


def _success_words(found: Found) -> tuple[str, list[str]]:
    session = found.session
    compiled = bool(session and session.compiles)
    headline = ("nothing fails: the script ran twice without an error" if compiled else
                "nothing to diagnose: the script ran without an error and never compiled anything")
    steps = []
    suppressed = [f for f in session.failures if f.origin == "compile"] if session else []
    if suppressed:  # torch._dynamo.config.suppress_errors: the frame ran eagerly, the run went on
        first = suppressed[0]
        headline = (f"the script ran without an error, but {len(suppressed)} compile(s) failed and ran eagerly "
                    f"instead (suppress_errors): {first.exception.rsplit('.', 1)[-1]}: "
                    f"{first_message_line(first.message)}")
        steps.append("Set torch._dynamo.config.suppress_errors = False and run `pt2doctor diagnose` again: it then "
                     "reproduces, classifies and minifies that failure.")
    steps.append("If the results look wrong rather than failing, run `pt2doctor accuracy SCRIPT`.")
    if session and (session.graph_breaks or session.recompiles):
        steps.append("It has graph breaks or recompiles: `pt2doctor run SCRIPT` explains them.")
    return headline, steps


def _flaky_words(a1: Attempt, a2: Attempt, runtime: RuntimeTriage | None) -> tuple[str, list[str]]:
    """Said with the two outcomes; where the runtime triage found a kernel reading or writing outside its buffers,
    that kernel leads as the likely cause."""
    headline = (f"flaky: the same command gave two different outcomes: run 1 {_ran(a1)}; run 2 {_ran(a2)}. Nothing "
                "was minified from it.")
    fault = runtime.fault if runtime is not None else None
    if fault is not None and fault.kind in ACCESS_FAULTS:
        headline += (f" A likely cause: kernel {fault.kernel} ({fault.kind.value.replace('_', ' ')}), whose reads or "
                     "writes outside its buffers can end otherwise from run to run.")
    return headline, ["Look for nondeterminism: random inputs without a seed, threads, time, or uninitialised memory.",
                      "Seed everything (torch.manual_seed) and run pt2doctor diagnose again."]


def _ran(attempt: Attempt) -> str:
    """How a run ended, in the error's own words (its signature normalises numbers away)."""
    return "passed" if attempt.outcome == "pass" else f"failed ({attempt.error or attempt.signature})"


def _kernel_steps(runtime: RuntimeTriage | None) -> list[str]:
    """The kernel the runtime triage found going wrong first, where it found one."""
    fault = runtime.fault if runtime is not None else None
    if fault is None:
        return []
    lines = ", ".join(dict.fromkeys(f"{Path(o.file).name}:{o.line}" for o in fault.sources if o.file))
    return [f"The first kernel that goes wrong is {fault.kernel} (graph {fault.graph}), fusing "
            f"{', '.join(fault.ops) or 'unknown ops'} from {lines or 'lines unknown'}: {fault.words}."]


_STOPPED = {"SIGINT": "interrupted (Ctrl-C)", "SIGTERM": "stopped (SIGTERM)", "SIGHUP": "stopped (SIGHUP)",
            BUDGET: "stopped at its --budget"}


def _stop_words(found: Found, ending: Ending | None, headline: str) -> tuple[str, list[str]]:
    """A stop's headline (how far it got, where nothing had ended it; what it concluded on, at its budget) and its
    last next step."""
    words = _STOPPED.get(found.stopped_by, f"stopped ({found.stopped_by})")
    if isinstance(ending, Diagnosed) and ending.cut_short:
        return f"{words}: {headline}", ["Run `pt2doctor diagnose` again with a larger --budget for the rest of the "
                                        "hand-over."]
    if ending is None and found.category is None:
        headline = f"{words} before the script's failure was reproduced"
    elif ending is None and found.category is not None:
        stage = f" in {STAGE_TITLES[found.stage]}" if found.stage else "; the failing stage was not found yet"
        headline = f"{words}: {found.category.value}{stage}: {found.error}"
    return headline, ["Run `pt2doctor diagnose` again to finish (what was found so far is in this bundle)."]


def _recompile_limit_steps(found: Found) -> list[str]:
    """The program asked to fail at the recompile limit (`fail_on_recompile_limit_hit`,
    `error_on_recompile`): a configuration's choice, not a compiler bug; what matters is why it recompiled."""
    chains = recompile_chains(found.session) if found.session else []
    chain = next((c for c in chains if c.limit_hit is not None and c.limit_hit.guard_failures), None)
    steps = ["Dynamo stopped the program at the recompile limit because the configuration asks it to "
             "(fail_on_recompile_limit_hit or error_on_recompile): not a compiler bug."]
    if chain is not None and chain.limit_cause:
        fix = chain.fixes[0] if chain.fixes else ""
        steps.append(f"It wanted to recompile because {chain.limit_cause}" + (f"; fix: {fix}" if fix else ""))
    command = " ".join(found.command)
    steps.append(f"`pt2doctor recompiles {command}` explains every recompile and checks the fixes; or raise "
                 "torch._dynamo.config.recompile_limit if each recompile is wanted.")
    return steps


_CARRIED = {BackendKind.SOURCE: "; repro.py defines it from your source",
            BackendKind.STUB: "; its source could not be read, so repro.py stands it in with a stub that raises the "
                              "recorded error"}


def _concluded_words(found: Found, reported: Reported) -> tuple[str, list[str]]:
    """The procedure's conclusion: the verdict in the headline; what to do at the stage that failed."""
    stage_title = STAGE_TITLES[found.stage] if found.stage else "an unknown stage"
    category = found.category.value if found.category else Category.UNCLASSIFIED.value
    on_rank = f" on {found.rank.label} (the first of {found.rank.ranks} ranks to fail)" if found.rank else ""
    headline = f"{category} in {stage_title}{on_rank}: {found.error}"
    steps: list[str] = []
    chosen = found.chosen_repro()
    runs = chosen.verify_runs if chosen else None
    if runs is not None and runs.flaky:
        headline = f"flaky: repro.py {runs} in fresh interpreters; {headline}"
        steps.append(f"repro.py {runs}: the failure does not happen every time. Say so when you file it, and look for "
                     "what varies between runs (threads, uninitialised memory, timing).")
    verified_workaround = any(w.verified for w in reported.workarounds)
    if found.category is Category.RECOMPILATION:
        steps += _recompile_limit_steps(found)
    elif found.stage is FailingStage.DYNAMO and found.category is Category.ACCURACY:
        holds = "repro.py" if found.program and found.program.verified else "the program"
        steps.append("Dynamo itself changes the result (it is wrong with backend='eager' too and right with "
                     f"compilation off): file it as a Dynamo correctness bug with issue.md, which holds {holds}.")
        if not verified_workaround:
            steps.append("Until it is fixed, keeping the function out of the graph (`@torch.compiler.disable`) may "
                         "help (not tried as a workaround).")
    elif found.stage is FailingStage.DYNAMO:
        at = f" at {found.user_frames[0].file}:{found.user_frames[0].line}" if found.user_frames else ""
        steps.append(f"Dynamo fails while tracing{at}; it fails with backend='eager' too, so no backend is involved.")
        if found.hint:
            steps.append(found.hint)
        if (replay := reported.replay) is not None and replay.verified:
            steps.append(f"`python {replay.path}` compiles that one frame again and fails the same way: attach it "
                         "(with its frames/*.pkl recording) to the issue, or step through it.")
        steps.append("If the code there is valid PyTorch, file it as a Dynamo bug with issue.md.")
    elif found.stage in GRAPH_STAGES:
        steps += _graph_stage_steps(found, verified_workaround)
    return headline, steps


def _graph_stage_steps(found: Found, verified_workaround: bool) -> list[str]:
    """A graph stage failed: a backend that passed to run with meanwhile, and the minimal graph to fix or to file."""
    steps = []
    passed = [b for b, r in found.stages.items() if r == "pass"]
    if not verified_workaround and passed:
        cost = "without your backend" if found.stage is FailingStage.BACKEND else "without Inductor's code generation"
        steps.append(f"Until it is fixed, torch.compile(..., backend={passed[-1]!r}) may run the script ({cost}; not "
                     "tried as a workaround).")
    m = found.minify
    verified = m is not None and m.verified
    if found.stage is FailingStage.BACKEND:  # the user's own backend: nothing to file with PyTorch
        backend = found.original_backend or "the original backend"
        carried = _CARRIED.get(found.backend.kind, "") if found.backend is not None else ""
        shows = f" (`python repro.py` shows it on {m.nodes_after} node(s))" if m is not None and verified else ""
        steps.append(f"The failure is inside {backend}{shows}: fix it there{carried}.")
    elif m is not None and verified:
        steps.append(f"File issue.md with the verified repro ({m.nodes_after} node(s): {', '.join(m.ops)}); "
                     "`python repro.py` shows the bug.")
    if m is not None and not verified and not (found.program and found.program.verified):
        steps.append("The repro did not verify in a fresh interpreter: do not file it as minimal.")
    return steps

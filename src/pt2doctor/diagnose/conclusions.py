"""How what `diagnose` established is said: headline, category refinements, user frames and next steps.

Contract: each function reads what the runs established in a `diagnose.found.Found` (and, to conclude, what the
steps returned for the report: `diagnose.reported.Reported`) and writes its headline, category, user frames, hint
and next steps: no runs, no I/O. `conclude` is the procedure's last step; the others
conclude early (success, flaky, a user error, a stop, the environment at fault) or refine as steps go.
"""

from __future__ import annotations

import re

from pt2doctor.analysis.failures import first_message_line
from pt2doctor.analysis.gpu_memory import HeldMemory
from pt2doctor.analysis.recompiles import recompile_chains
from pt2doctor.capture.process_meta import is_user_file
from pt2doctor.diagnose import next_steps
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.reported import Reported
from pt2doctor.diagnose.stages import GRAPH_STAGES, blame, ladder
from pt2doctor.diagnose.stopping import BUDGET
from pt2doctor.model import Category, SourceLoc
from pt2doctor.model.category_policy import refined
from pt2doctor.model.diagnosis import STAGE_TITLES, Attempt, Control, FailingStage
from pt2doctor.model.minify import BackendKind


def gpu_held(found: Found, held: HeldMemory) -> None:
    """Two runs ran out of GPU memory that other processes held: nothing about the program can be said (not flaky,
    not a failure of its own); said with how much it asked for and how much the others held."""
    found.gpu_held = held.describe()
    found.headline = f"not diagnosed: the GPU's memory was held by other processes in two runs ({found.gpu_held})"
    found.next_steps.append("Run it again once the GPU is free (`nvidia-smi` lists the processes that hold it) or on "
                            "another GPU (CUDA_VISIBLE_DEVICES): the machine's state, not a flaky bug of the program.")


def success(found: Found) -> None:
    session = found.session
    compiled = bool(session and session.compiles)
    found.headline = ("nothing fails: the script ran twice without an error" if compiled else
                      "nothing to diagnose: the script ran without an error and never compiled anything")
    suppressed = [f for f in session.failures if f.origin == "compile"] if session else []
    if suppressed:  # torch._dynamo.config.suppress_errors: the frame ran eagerly, the run went on
        first = suppressed[0]
        found.headline = (f"the script ran without an error, but {len(suppressed)} compile(s) failed and ran eagerly "
                          f"instead (suppress_errors): {first.exception.rsplit('.', 1)[-1]}: "
                          f"{first_message_line(first.message)}")
        found.next_steps.append("Set torch._dynamo.config.suppress_errors = False and run `pt2doctor diagnose` "
                                "again: it then reproduces, classifies and minifies that failure.")
    found.next_steps.append("If the results look wrong rather than failing, run `pt2doctor accuracy SCRIPT`.")
    if session and (session.graph_breaks or session.recompiles):
        found.next_steps.append("It has graph breaks or recompiles: `pt2doctor run SCRIPT` explains them.")


def flaky(found: Found, a1: Attempt, a2: Attempt) -> None:
    found.flaky = True
    found.category = a1.category or a2.category or Category.UNCLASSIFIED
    found.error = a1.error or a2.error
    found.headline = (f"flaky: the same command gave two different outcomes: run 1 {_said(a1)}; "
                      f"run 2 {_said(a2)}. Nothing was minified from it.")
    found.next_steps += [
        "Look for nondeterminism: random inputs without a seed, threads, time, or uninitialised memory.",
        "Seed everything (torch.manual_seed) and run pt2doctor diagnose again.",
    ]


def _said(attempt: Attempt) -> str:
    """How a run ended, in the error's own words (its signature normalises numbers away)."""
    return "passed" if attempt.outcome == "pass" else f"failed ({attempt.error or attempt.signature})"


def user_error(found: Found, off: Attempt) -> None:
    found.category = Category.USER_ERROR
    found.stage = None  # it fails with compilation off: no compiler stage is to blame
    same = off.signature == found.attempts[0].signature
    found.headline = ("the script fails the same way with compilation turned off: a bug in the script, not in "
                      "torch.compile" if same else
                      f"the script fails with compilation turned off too ({off.error or off.signature}): "
                      "fix that first")
    where(found)
    found.next_steps.append("Fix the error in the script "
                            "(it also fails under torch.compiler.set_stance('force_eager')).")


_STOPPED = {"SIGINT": "interrupted (Ctrl-C)", "SIGTERM": "stopped (SIGTERM)", "SIGHUP": "stopped (SIGHUP)",
            BUDGET: "stopped at its --budget"}


def stopped(found: Found, reported: Reported) -> None:
    """What a stop leaves (Ctrl-C, SIGTERM, SIGHUP, the budget): the stage table of the runs that finished (a stage is
    blamed only when every rung below the failing one passed), and a headline saying how far it got. A diagnosis
    stopped at its budget with its verdict known concludes on what it found (the hand-over it had time for)."""
    words = _STOPPED.get(found.stopped_by, f"stopped ({found.stopped_by})")
    if not found.stages and found.category is not None:
        outcomes = {a.backend: a.outcome for a in found.attempts if a.backend}
        rungs = ladder(found.original_backend)
        outcomes.setdefault(rungs[-1][0], "fail")  # the original run: it failed, that is why we are here
        first_unknown = next((i for i, (b, _) in enumerate(rungs) if b not in outcomes), len(rungs))
        found.stage, found.stages = blame(rungs[:first_unknown], outcomes)
        found.stages.update({b: "skipped" for b, _ in rungs[first_unknown:]})
    if found.stopped_by == BUDGET and found.category is not None and found.stage is not None and not found.headline:
        refine_category(found)
        conclude(found, reported)
        found.headline = f"{words}: {found.headline}"
        found.next_steps.append("Run `pt2doctor diagnose` again with a larger --budget for the rest of the hand-over.")
        return
    if not found.headline:
        if found.category is None:
            found.headline = f"{words} before the script's failure was reproduced"
        else:
            stage = f" in {STAGE_TITLES[found.stage]}" if found.stage else "; the failing stage was not found yet"
            found.headline = f"{words}: {found.category.value}{stage}: {found.error}"
    found.next_steps.append("Run `pt2doctor diagnose` again to finish (what was found so far is in this bundle).")


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


def _recompile_limit_steps(found: Found) -> None:
    """The program asked to fail at the recompile limit (`fail_on_recompile_limit_hit`,
    `error_on_recompile`): a configuration's choice, not a compiler bug; what matters is why it recompiled."""
    chains = recompile_chains(found.session) if found.session else []
    chain = next((c for c in chains if c.limit_hit is not None and c.limit_hit.guard_failures), None)
    found.next_steps.append("Dynamo stopped the program at the recompile limit because the configuration asks it to "
                            "(fail_on_recompile_limit_hit or error_on_recompile): not a compiler bug.")
    if chain is not None and chain.limit_cause:
        fix = chain.fixes[0] if chain.fixes else ""
        found.next_steps.append(f"It wanted to recompile because {chain.limit_cause}"
                                + (f"; fix: {fix}" if fix else ""))
    command = " ".join(found.command)
    found.next_steps.append(f"`pt2doctor recompiles {command}` explains every recompile and checks the fixes; or "
                            "raise torch._dynamo.config.recompile_limit if each recompile is wanted.")


_CARRIED = {BackendKind.SOURCE: "; repro.py defines it from your source",
            BackendKind.STUB: "; its source could not be read, so repro.py stands it in with a stub that raises the "
                              "recorded error"}


def conclude(found: Found, reported: Reported) -> None:
    stage_title = STAGE_TITLES[found.stage] if found.stage else "an unknown stage"
    backend = found.original_backend or "the original backend"
    category = found.category.value if found.category else Category.UNCLASSIFIED.value
    on_rank = f" on {found.rank} (the first of {found.ranks} ranks to fail)" if found.rank else ""
    found.headline = f"{category} in {stage_title}{on_rank}: {found.error}"
    _flaky_repro(found)
    workarounds = reported.workarounds
    next_steps.workaround_steps(found, workarounds)
    if found.category is Category.RECOMPILATION:
        _recompile_limit_steps(found)
    elif found.stage is FailingStage.DYNAMO and found.category is Category.ACCURACY:
        holds = "repro.py" if found.program and found.program.verified else "the program"
        found.next_steps.append("Dynamo itself changes the result (it is wrong with backend='eager' too and right with "
                                f"compilation off): file it as a Dynamo correctness bug with issue.md, which holds "
                                f"{holds}.")
        if not any(w.verified for w in workarounds):
            found.next_steps.append("Until it is fixed, keeping the function out of the graph "
                                    "(`@torch.compiler.disable`) may help (not tried as a workaround).")
    elif found.stage is FailingStage.DYNAMO:
        where = found.user_frames[0] if found.user_frames else None
        at = f" at {where.file}:{where.line}" if where else ""
        found.next_steps.append(f"Dynamo fails while tracing{at}; it fails with backend='eager' too, "
                                "so no backend is involved.")
        if found.hint:
            found.next_steps.append(found.hint)
        if (replay := reported.replay) is not None and replay.verified:
            found.next_steps.append(f"`python {replay.path}` compiles that one frame again and fails the same way: "
                                    "attach it (with its frames/*.pkl recording) to the issue, or step through it.")
        found.next_steps.append("If the code there is valid PyTorch, file it as a Dynamo bug with issue.md.")
    elif found.stage in GRAPH_STAGES:
        passed = [b for b, r in found.stages.items() if r == "pass"]
        if not any(w.verified for w in workarounds) and passed:
            cost = ("without your backend" if found.stage is FailingStage.BACKEND
                    else "without Inductor's code generation")
            found.next_steps.append(f"Until it is fixed, torch.compile(..., backend={passed[-1]!r}) may run the script "
                                    f"({cost}; not tried as a workaround).")
        m = found.minify
        verified = m is not None and m.verified
        if found.stage is FailingStage.BACKEND:  # the user's own backend: nothing to file with PyTorch
            carried = _CARRIED.get(found.backend_kind, "") if found.backend_kind else ""
            shows = f" (`python repro.py` shows it on {m.nodes_after} node(s))" if m is not None and verified else ""
            found.next_steps.append(f"The failure is inside {backend}{shows}: fix it there{carried}.")
        elif m is not None and verified:
            found.next_steps.append(f"File issue.md with the verified repro ({m.nodes_after} node(s): "
                                    f"{', '.join(m.ops)}); `python repro.py` shows the bug.")
        if m is not None and not verified and not (found.program and found.program.verified):
            found.next_steps.append("The repro did not verify in a fresh interpreter: do not file it as minimal.")
    next_steps.program_steps(found)
    if (b := reported.hand_over.bisection) and b.subsystem:
        found.next_steps.append(f"CompilerBisector: disabling {b.describe()} makes it pass.")


def environment_fails(found: Found, control: Control) -> None:
    """The trivial program of the same kind fails the same way on this machine: the environment is at fault,
    not the program. Said in the headline with the control's words; nothing is minified and no culprit named."""
    found.headline = (f"the environment, not your program: {control.program} fails the same way on this machine "
                      f"({found.error})")
    found.next_steps += [
        f"Every program of this kind fails here: `python {control.path}` (one op) shows it. Repair the installation "
        "(the C++ compiler, Triton, the CUDA driver, torch's build) or run on another machine, then run "
        "pt2doctor diagnose again.",
        "Do not file your program as a PyTorch bug: a report would need the environment's failure, not your code.",
    ]


def _flaky_repro(found: Found) -> None:
    """A repro that failed in some of its verification runs and not in others is a coin toss: the bug is
    flaky, whatever the two runs of the script showed (both failed), and is said so with the rate."""
    chosen = found.chosen_repro()
    runs = chosen.verify_runs if chosen else None
    if runs is None or not runs.flaky:
        return
    found.flaky = True
    found.headline = f"flaky: repro.py {runs} in fresh interpreters; {found.headline}"
    found.next_steps.append(f"repro.py {runs}: the failure does not happen every time. Say so when you file it, "
                            "and look for what varies between runs (threads, uninitialised memory, timing).")

"""diagnose's first steps: reproduce the failure, and say which failure is diagnosed.

Contract: `reproduce` runs the unchanged script with the graph recorder on, each graph's first call judged against
eager (so a wrong result's graph is known from this run: `diagnose.wrong_graph`), and starts the warm workers beside
it (`processes.workers`: the stage ladder on the recorded graph, the minifier, the program reducer and the control
run in them): the run that stands for the failure has the machine to itself but for their warm-up. The second,
plain run (`SecondRun`) is forked as soon as the fork server's imports are done, while the first still goes, at low
priority until it is awaited (it takes the core the first run leaves idle); where the first ended before that, it
starts once the stage's evidence is in hand. It stands where the first failed and the later runs may fork (else it is
stopped: a program that passed gets its plain second run anew), and is checked after the hand-over (`repeated`), so
neither the verdict, the minifier nor the hand-over waits for it (a run the hand-over forks before it ended stands only
once it has: `diagnose.runs.Forking`); a job of several ranks runs both at once (which rank failed first needs both).
It concludes (`STOP`) when both pass (nothing to diagnose) or, with both in hand, the failure does not repeat the same
way (flaky), and otherwise returns `Reproduced`. No stage run is queued behind them: what the recording shows decides
whether the stage is found on a graph or needs runs of the program (`diagnose.narrowing.stage_evidence`).
`repeated` checks the second run (after the hand-over, or once the procedure ended where a step concluded before
it: `diagnose.procedure`): the same failure, or flaky (`STOP`, what the steps before concluded and handed over set
aside), or the
recording changed the outcome (`Restart`: the procedure runs again from `classify` on the plain runs).
A run that ran out of GPU memory that other processes held (`analysis.gpu_memory`) is made once more in its place:
the machine's state, never a flaky verdict; where the first run's repeat runs out again, nothing is diagnosed
(`diagnose.endings.GpuHeld`, exit 75), and where the second's does, the first run's failure stands, its repeat
unchecked.
`classify` takes the failure the first run ended with: its category (`analysis.failures`), a failure that may lie in
a graph AOTAutograd's cache served the first run (which keeps that cache on, as the user's run does: one more
recorded run with it off then stands for the failure, `diagnose.aot_cache`), a CUDA kernel error tied
to the compiled graph that launched it (one more run with CUDA_LAUNCH_BLOCKING=1, which then stands for the
failure), the rank of a job that failed first, and the backend and device the recording saw (`Classified`).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

from pt2doctor.analysis.failures import asynchronous_cuda_error
from pt2doctor.analysis.gpu_memory import HeldMemory, held_by_others
from pt2doctor.capture.process_meta import RunPaths
from pt2doctor.diagnose.aot_cache import keeps_aot_cache, record_what_the_cache_served
from pt2doctor.diagnose.conclusions import flaky, gpu_held, success
from pt2doctor.diagnose.forking import sets_environment
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.ranks import name_rank
from pt2doctor.diagnose.repeat import SecondRun
from pt2doctor.diagnose.runs import VariantRunner
from pt2doctor.diagnose.step import STOP, Context
from pt2doctor.diagnose.variants import Variant
from pt2doctor.diagnose.wrong_graph import accuracy_failures
from pt2doctor.model import Category
from pt2doctor.model.category_policy import policy
from pt2doctor.model.diagnosis import Attempt
from pt2doctor.model.minify import DEFAULT_TOLERANCE, BackendSpec
from pt2doctor.model.recording import read_failures, read_index
from pt2doctor.model.serialize import RecordError
from pt2doctor.processes.workers import Workers, start_workers


@dataclass(frozen=True)
class Reproduced:
    """The failure: `first` (recorded), `second` (plain, or the same label when only the plain runs are diagnosed;
    None while it is still to come: `pending`, checked by `repeated`), and the warm workers started beside the first
    (None: after a restart, where the recording is not used)."""

    first: Attempt
    second: Attempt | None = None
    pending: SecondRun | None = None
    workers: Workers | None = None

    def close(self) -> None:
        if self.workers is not None:
            self.workers.close()


@dataclass(frozen=True)
class Restart:
    """The recording changed how the program ends: the procedure runs again from `classify`, on the plain runs."""

    reproduced: Reproduced


@dataclass(frozen=True)
class Classified:
    """The failure diagnosed from here on: `attempt`, the run that stands for it (its recording is minified,
    its frames say where), the backend its failing graph was compiled with, and whether any recorded graph
    ran on a CUDA device."""

    attempt: Attempt
    backend: BackendSpec | None
    on_cuda: bool


def reproduce(ctx: Context, found: Found) -> Reproduced:
    runner, options = ctx.runner, ctx.options
    first = runner.submit(Variant.original(1, record=True, accuracy_tolerance=DEFAULT_TOLERANCE,
                                           aot_cache=keeps_aot_cache(runner)))
    together = options.torchrun is not None  # a job: which rank failed first is read from both runs
    second = runner.submit(Variant.original(2)) if together else None
    workers = start_workers(options.jobs, options.query_timeout_s, options.out_dir, fork=False, fresh_forks=True)
    importing = _load_graph_code_meanwhile()
    repeat = SecondRun(runner) if second is None else None
    forks = workers.forks if not sets_environment(options.script) else None
    if repeat is not None and forks is not None:
        repeat.start_early(forks, first)
    try:
        ended = first.result()
        # before anything here imports torch: two threads importing it at once can meet a module half-initialised
        # (Inductor's modules import each other: an ImportError of a circular import)
        importing.join()
        a1, held = _unless_gpu_held(runner, found, ended,
                                    Variant.original(5, record=True, accuracy_tolerance=DEFAULT_TOLERANCE))
        if repeat is not None:
            session = runner.sessions.get(a1.label)
            forked = held is None and a1.outcome == "fail" and session is not None and session.extras.torch_imported
            repeat.first_ended(a1, forks if forked else None)
        if held is None:
            found.session = runner.sessions.get(a1.label)
            if repeat is not None and a1.outcome == "fail":  # made and checked beside the graph steps (`repeated`)
                return Reproduced(a1, pending=repeat, workers=workers)
            a2, held = _unless_gpu_held(runner, found, (second or runner.submit(Variant.original(2))).result(),
                                        Variant.original(6))
    except BaseException:
        workers.close()
        raise
    if held is not None:
        gpu_held(found, held)
        workers.close()
        return STOP
    reproduced = _compared(runner, found, a1, a2)
    if reproduced is STOP:
        workers.close()
        return STOP
    return Reproduced(reproduced.first, reproduced.second, workers=workers)


def _unless_gpu_held(runner: VariantRunner, found: Found, attempt: Attempt, again: Variant
                     ) -> tuple[Attempt, HeldMemory | None]:
    """`attempt` (recorded among the attempts), or where it ran out of GPU memory that other processes held
    (`analysis.gpu_memory`), `again` made in its place: the machine's state is not the program's, and never makes a
    flaky verdict. With what the others held where `again` ran out of it for the same reason (else None)."""
    found.attempts.append(attempt)
    held = _gpu_held_in(runner, attempt)
    if held is None:
        return attempt, None
    runner.reporter.status(f"run {attempt.label} ran out of GPU memory that other processes held: running it again")
    retry = runner.submit(again).result()
    found.attempts.append(retry)
    still = _gpu_held_in(runner, retry)
    found.notes.append(f"run {attempt.label} ran out of GPU memory, {held.describe()}: made once more as "
                       f"{retry.label}, which " + ("ran out again" if still else "stands for it"))
    return retry, still


def _gpu_held_in(runner: VariantRunner, attempt: Attempt) -> HeldMemory | None:
    session = runner.sessions.get(attempt.label) if attempt.outcome == "fail" else None
    failure = session.failures[0] if session is not None and session.failures else None
    return held_by_others(failure.message) if failure is not None else None


def _load_graph_code_meanwhile() -> threading.Thread:
    """What loading a recorded graph imports here (torch, Dynamo, Inductor's prims: seconds on a few cores) is
    imported while the first run goes, in a thread: the graph steps that follow it start at once. Nothing else here
    imports torch until the thread has ended (join it)."""
    def load() -> None:
        from pt2doctor.capture import torch_compat
        from pt2doctor.reduce import fx_load  # noqa: F401

        torch_compat.import_dynamo()
        torch_compat.register_inductor_prims()

    thread = threading.Thread(target=load, daemon=True, name="pt2doctor-imports")
    thread.start()
    return thread


def repeated(ctx: Context, found: Found, reproduce: Reproduced) -> bool | Restart:
    """The second run, checked once it ended (see the contract); what the graph steps found from a failure that does
    not repeat is set aside."""
    if reproduce.pending is None or reproduce.pending.checked:
        return True
    a1 = reproduce.first
    before = len(found.attempts)
    a2, held = _unless_gpu_held(ctx.runner, found, reproduce.pending.result(), Variant.original(6))
    reproduce.pending.checked = True
    if a2.forked and a2.signature != a1.signature:
        a2 = _anew(ctx.runner, found, a2)
    _after_the_first(found, a1, before)
    if held is not None:  # the first run's failure stands; whether it repeats could not be seen
        found.notes.append(f"whether the failure repeats is not known: the second run ran out of GPU memory twice, "
                           f"{held.describe()}")
        return True
    if a1.signature == a2.signature:
        return True
    _set_aside(found)
    compared = _compared(ctx.runner, found, a1, a2)
    if compared is STOP or not found.recording_changed_outcome:
        return STOP
    return Restart(Reproduced(compared.first, compared.second))


def _after_the_first(found: Found, first: Attempt, since: int) -> None:
    """The repeat's runs, recorded from `since` on (after the hand-over's), listed right after the first run: the
    attempts read as the failure, its repeat, then what was tried."""
    repeats = found.attempts[since:]
    del found.attempts[since:]
    at = next((i + 1 for i, a in enumerate(found.attempts) if a is first), len(found.attempts))
    found.attempts[at:at] = repeats


def _anew(runner: VariantRunner, found: Found, forked: Attempt) -> Attempt:
    """The forked repeat ended otherwise than the first run: forking is off from here on, and the repeat is made again
    in a new interpreter, which stands for it (a fork that changed the outcome is pt2doctor's doing, not flakiness)."""
    runner.forking.server = None
    runner.reporter.status(f"run {forked.label}, forked, ended otherwise than the first: running it anew")
    again = runner.submit(Variant("original-2-anew")).result()
    found.attempts.append(again)
    found.notes.append(f"the first run's repeat, forked from an interpreter that had imported torch, ended otherwise "
                       f"({forked.error or forked.outcome}); made again in a new interpreter "
                       f"({again.error or again.outcome}), which stands for it: every later run started anew")
    return again


def _compared(runner: VariantRunner, found: Found, a1: Attempt, a2: Attempt) -> Reproduced:
    """Both runs in hand: nothing fails, flaky (`STOP`, concluded), the same failure, or the recording changed it."""
    if a1.outcome == "pass" and a2.outcome == "pass":
        success(found)
        return STOP
    if a1.signature == a2.signature:
        return Reproduced(a1, a2)
    plain = _unless_recording_changed_it(runner, found, a1, a2)
    if plain is None:  # flaky
        return STOP
    if plain.outcome == "pass":
        success(found)
        return STOP
    return Reproduced(plain, a2)


def _set_aside(found: Found) -> None:
    """What the steps before concluded from a failure that may not repeat is not the diagnosis: its verdict and what
    was drawn from it, the hand-over among it, go (the runs made stay, as evidence)."""
    found.category, found.stage, found.stages, found.user_frames, found.hint = None, None, {}, [], ""
    found.minify, found.program, found.ending = None, None, None
    found.short, found.harness_test, found.set_aside = None, None, True  # the hand-over, the control: not reported


def classify(ctx: Context, found: Found, reproduce: Reproduced) -> Classified:
    a1, a2 = reproduce.first, reproduce.second
    found.category, found.error = a1.category or Category.UNCLASSIFIED, a1.error
    repeat = reproduce.pending
    a1 = record_what_the_cache_served(ctx.runner, found, a1, repeat.start if repeat is not None else None)
    a1 = _tie_cuda_error_to_graph(ctx.runner, found, a1)
    name_rank(found, ctx.runner.jobs.get(a1.label), a1, a2 if a2 is not None and a2.label != a1.label else None)
    spec, on_cuda = recorded_backend_spec(ctx.runner.run_dir(a1.label))
    found.backend = spec
    _judged_wrong(ctx.runner.run_dir(a1.label), found)
    return Classified(a1, spec, on_cuda)


def _judged_wrong(run_dir: Path, found: Found) -> None:
    """The script's own exception, where the first run's accuracy check judged a compiled graph wrong against eager
    on the values the program passed it: a wrong result its check found (`Policy.judged_wrong`), known before any
    stage run of the program."""
    promoted = policy(found.category).judged_wrong
    wrong = accuracy_failures(run_dir) if promoted else []
    if not promoted or not wrong:
        return
    found.notes.append(f"the script's own check failed ({found.error}), and the first run judged compiled graph "
                       f"{wrong[-1].graph} wrong against eager on the values the program passed it: a wrong result "
                       f"({promoted.value})")
    found.category = promoted


def _unless_recording_changed_it(runner: VariantRunner, found: Found, recorded: Attempt,
                                 plain: Attempt) -> Attempt | None:
    """The recorded run and the plain one ended differently: flaky, unless each ends the same way again (one
    more plain and one more recorded run, side by side), in which case recording changed the outcome. Then
    the plain runs are the program's behaviour: the diagnosis goes on from them, without the recording
    (nothing is minified from a recording that does not fail as the program does). A program that fails
    only on its first run, or at random, ends otherwise in one of the pairs: flaky. None when it is flaky
    (already concluded)."""
    runner.reporter.status("the recorded run and the plain run ended differently: running each once more")
    with found.timed("reproduce_again"):
        plain_again = runner.submit(Variant.original(3))
        recorded_again = runner.submit(Variant.original(4, record=True, accuracy_tolerance=DEFAULT_TOLERANCE))
        again, again_recorded = plain_again.result(), recorded_again.result()
    found.attempts += [again, again_recorded]
    if again.signature != plain.signature:
        flaky(found, plain, again)
        return None
    if again_recorded.signature != recorded.signature:
        flaky(found, recorded, again_recorded)
        return None
    found.recording_changed_outcome = True
    found.notes.append(f"recording the graphs changed the outcome (recorded run: {recorded.error or recorded.outcome}; "
                       f"two plain runs: {plain.error or plain.outcome}): the plain runs are diagnosed, and no "
                       "graph is minified from the recording")
    found.session = runner.sessions.get(plain.label)
    return plain


def _tie_cuda_error_to_graph(runner: VariantRunner, found: Found, a1: Attempt) -> Attempt:
    """A CUDA kernel error that no compiled graph raised may still be a compiled kernel's: CUDA reports
    it at a later call, after the graph that launched it returned. One more recorded run with
    CUDA_LAUNCH_BLOCKING=1 raises it at its launch; when a compiled graph raised it there, that run
    stands for the failure from here on (its graphs are minified, its frames say where)."""
    failure = found.session.failures[0] if found.session and found.session.failures else None
    if (failure is None or not asynchronous_cuda_error(failure) or os.environ.get("CUDA_LAUNCH_BLOCKING") == "1"
            or failed_graph(runner.run_dir(a1.label))):
        return a1
    runner.reporter.status("CUDA reported a kernel error after the fact: re-running with CUDA_LAUNCH_BLOCKING=1")
    with found.timed("launch_blocking"):
        blocking = runner.submit(Variant.launch_blocking()).result()
    found.attempts.append(blocking)
    graph = failed_graph(runner.run_dir(blocking.label)) if blocking.outcome == "fail" else None
    if graph is None:
        found.notes.append(f"with CUDA_LAUNCH_BLOCKING=1 no compiled graph raised the CUDA error ({blocking.outcome}: "
                           f"{blocking.error or 'no error'}): the failing kernel was launched outside compiled code")
        return a1
    found.notes.append(f"CUDA reported the kernel error only after compiled graph {graph} had returned; with "
                       "CUDA_LAUNCH_BLOCKING=1 that graph raises it, so that run is the one diagnosed")
    found.session = runner.sessions.get(blocking.label)
    found.category, found.error = blocking.category or found.category, blocking.error
    return blocking


def failed_graph(run_dir: Path) -> str | None:
    """The recorded graph that the graph recorder saw raise last (the failure the run ended with) in
    `run_dir`'s run, if any; a graph its accuracy check judged wrong raised nothing."""
    try:
        failures = [f for f in read_failures(RunPaths(run_dir).graphs_dir) if f.phase != "accuracy"]
    except RecordError:  # a damaged recording: the minifier reports it when it reads the same file
        return None
    return failures[-1].graph if failures else None


def recorded_backend_spec(run_dir: Path) -> tuple[BackendSpec | None, bool]:
    """The recorded backend as the recording can carry it (a registered name, the script's own source, or
    a stub): the failing graph's (a script may compile other functions with other backends), else the
    first graph's; and whether any recorded graph's inputs were on a CUDA device."""
    try:
        index = read_index(RunPaths(run_dir).graphs_dir)
    except RecordError:  # a damaged recording: the minifier reports it when it reads the same file
        return None, False
    entries, failed = {e.id: e for e in index}, failed_graph(run_dir)
    while failed in entries and entries[failed].backend is None and entries[failed].parent:
        failed = entries[failed].parent
    own = entries[failed].backend if failed in entries else None
    backend = own if own is not None and own.name else next(
        (e.backend for e in index if e.backend is not None and e.backend.name), None)
    return backend, any(e.on_cuda for e in index)

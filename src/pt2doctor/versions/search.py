"""The search: a repro run under the user's torch, then under other releases until the answer is known.

Contract: `search_versions(repro, settings, out_dir, reporter) -> VersionsResult` never raises for what
the repro or pip does, and never installs anything into the user's environment:
1. `python repro.py` under the user's own interpreter (as they would run it) gives the target: its failure
   signature (`analysis.run_signature`). A repro that passes there ends the search (nothing to look for).
2. pip lists the releases (`versions.torch_envs.list_releases`); the list searched is the user's release up to
   the newest, or the ones asked for (`analysis.versions.search_list`).
3. Release by release, in `analysis.versions.next_release`'s order: an environment (cached, pre-made with
   `--torch-env`, or installed now), then the repro in it, judged against the target; a run that passes
   is run once more, and counts as passing only when both did (a flaky repro is no fix). The search stops
   when the order says it is done, or at the budget or low disk (`stopped` says which).
4. `analysis.versions.conclude` names the release that fixed it and the one that broke it.
Each release's logs (pip's output, the repro's) are in `out_dir/<release>/`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import msgspec

from pt2doctor.analysis.run_signature import run_signature, uncaught_exception
from pt2doctor.analysis.versions import (
    build_note,
    build_of,
    conclude,
    next_release,
    outcome_of,
    public,
    requirement,
    search_list,
)
from pt2doctor.capture.runner import Reporter, SilentReporter
from pt2doctor.model.versions import OUTCOME_WORDS, ReleaseOutcome, ReleaseRun, TorchProbe, VersionsResult
from pt2doctor.processes.program_run import run_program, this_interpreter
from pt2doctor.versions.options import VersionsSettings
from pt2doctor.versions.torch_envs import (
    CannotRun,
    Limits,
    ListingError,
    OutOfBudget,
    ensure_env,
    given_env,
    isolated_environ,
    list_releases,
    probe,
)

_GB = 1024 ** 3


def search_versions(repro: Path, settings: VersionsSettings, out_dir: Path, reporter: Reporter | None = None,
                    args: tuple[str, ...] = ()) -> VersionsResult:
    reporter = reporter or SilentReporter()
    started = time.monotonic()
    run = _Repro(repro.resolve(), args, settings.run_timeout_s)
    repro = run.path
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        mine = probe(this_interpreter(), out_dir / "yours" / "probe", isolated=False)
    except CannotRun as exc:
        return VersionsResult(str(repro), "", "", stopped=str(exc))
    user = public(mine.version)
    reporter.status(f"torch {user} (yours): python {repro.name}")
    baseline = _run(this_interpreter(), run, out_dir / "yours", None)
    target = baseline.signature
    first = _release_run(user, mine, baseline, "", None, target or "")
    if target is None:
        return VersionsResult(str(repro), "", user, (user,), (first,), args=args, stopped=(
            f"python {repro.name} passes under your torch {mine.version}: there is no failure to look for"),
            time_s=_since(started))
    result = _search(run, settings, out_dir, reporter, mine, first, target)
    return msgspec.structs.replace(result, time_s=_since(started))


def _search(repro: _Repro, settings: VersionsSettings, out_dir: Path, reporter: Reporter, mine: TorchProbe,
            first: ReleaseRun, target: str) -> VersionsResult:
    notes: list[str] = []
    try:
        available = list_releases(out_dir / "pip")
    except ListingError as exc:
        available = ()
        notes.append(str(exc))
    releases = search_list(available, mine.version, settings.releases)
    limits = Limits(None if settings.budget_s is None else time.monotonic() + settings.budget_s,
                    int(settings.min_free_gb * _GB))
    given = {public(v): p for v, p in settings.torch_envs}
    tried = {first.release: first}
    stopped = ""
    while (release := next_release(releases, {r: run.outcome for r, run in tried.items()})) is not None:
        if limits.out_of_time():
            stopped = f"stopped before the search ended: {limits.out_of_time()} (torch {release} was next)"
            break
        reporter.status(f"torch {release}: " + ("your environment " + str(given[release]) if release in given
                                               else requirement(release, mine.version, available)))
        try:
            tried[release] = _try(release, repro, settings, out_dir / release, reporter, limits, given.get(release),
                                  requirement(release, mine.version, available), target)
        except OutOfBudget as exc:
            tried[release] = ReleaseRun(release, ReleaseOutcome.CANNOT_RUN, why=str(exc))
            stopped = f"stopped before the search ended: {exc}"
            break
        reporter.status(f"torch {release}: {_said(tried[release])}")
    runs = tuple(tried[r] for r in sorted(tried, key=lambda r: releases.index(r) if r in releases else -1))
    fixed, regressed = conclude(releases, runs, first.release)
    notes += [n for n in (build_note(first.build, r) for r in runs) if n]
    return VersionsResult(str(repro.path), target, first.release, releases, runs, fixed, regressed, stopped,
                          tuple(notes), args=repro.args)


def _try(release: str, repro: _Repro, settings: VersionsSettings, logs: Path, reporter: Reporter, limits: Limits,
         given: Path | None, wanted: str, target: str) -> ReleaseRun:
    """The repro under one release; CANNOT_RUN with pip's or the probe's words when it could not run."""
    install_s: float | None = None
    try:
        if given is not None:
            python = given_env(given)
            found = probe(python, logs / "probe")
            if public(found.version) != release:
                raise CannotRun(f"--torch-env {release}={given} holds torch {found.version}")
        else:
            python, env, made = ensure_env(settings.cache_dir, release, wanted, limits, reporter, logs)
            found = TorchProbe(env.torch, env.cuda, "", "")
            install_s = env.install_s if made else None
    except CannotRun as exc:
        return ReleaseRun(release, ReleaseOutcome.CANNOT_RUN, why=str(exc))
    env_dir = str(Path(python).parent.parent)
    return _release_run(release, found, _run(python, repro, logs, isolated_environ()), env_dir, install_s,
                        target)


@dataclass(frozen=True, slots=True)
class _Repro:
    """What is run under each release: `python PATH ARGS...` in PATH's directory, stopped after `timeout_s`."""

    path: Path
    args: tuple[str, ...]
    timeout_s: float


@dataclass(frozen=True, slots=True)
class _Ran:
    """How `python repro.py` ended under one release: its signature (None: it passed), the error in its own
    words, the mean seconds of its runs, and whether it passed once before it failed (flaky)."""

    signature: str | None
    error: str
    seconds: float
    flaky: bool = False


def _run(python: str, repro: _Repro, logs: Path, env: dict[str, str] | None) -> _Ran:
    """`python repro.py` under `python`; a run that passes is run once more, and passes only if both did."""
    times: list[float] = []
    for attempt in (1, 2):
        ran = run_program((python, repro.path.name, *repro.args), cwd=repro.path.parent, logs=logs / f"run-{attempt}",
                          timeout_s=repro.timeout_s, env=env)
        times.append(ran.wall_s)
        signature = "timeout" if ran.stopped else run_signature(ran.returncode or 0, ran.stdout, ran.stderr)
        if signature is not None:
            error = signature if ran.stopped else _error(ran.stderr) or signature
            return _Ran(signature, error, _mean(times), flaky=attempt == 2)
    return _Ran(None, "", _mean(times))


def _release_run(release: str, found: TorchProbe, ran: _Ran, env: str, install_s: float | None,
                 target: str) -> ReleaseRun:
    outcome = outcome_of(ran.signature, target)
    why = ran.error if outcome is ReleaseOutcome.FAILS_OTHER else ""
    if ran.flaky:
        why = "passed once, then failed" + (f": {why}" if why else " the same way")
    return ReleaseRun(release, outcome, found.version, build_of(found.cuda), ran.signature or "", why, install_s,
                      ran.seconds, env)


def _mean(times: list[float]) -> float:
    return round(sum(times) / len(times), 3)


def _error(stderr: str) -> str:
    raised = uncaught_exception(stderr)
    if raised is None:
        return ""
    exception, message, _ = raised
    first = next((line for line in message.splitlines() if line.strip()), "")
    return f"{exception.rsplit('.', 1)[-1]}: {first}"[:300]


def _said(run: ReleaseRun) -> str:
    detail = run.why or (run.signature if run.outcome is not ReleaseOutcome.PASSES else "")
    return OUTCOME_WORDS[run.outcome] + (f" ({detail})" if detail else "")


def _since(started: float) -> float:
    return round(time.monotonic() - started, 1)

"""What a repro does under other torch releases (`pt2doctor versions`, `diagnose --versions`).

Contract: frozen, torch-free msgspec values, written into `diagnosis.json` (`Diagnosis.versions`) and
`versions.json`. A `ReleaseRun` is the repro run once under one torch release, in a virtual environment
of its own (or the user's interpreter for the user's release), judged by the failure signature the repro
gave under the user's release (`target`): it fails the same way, passes, fails otherwise, or could not be
run (`why` says why: pip could not install it, the disk or the budget ran low, the environment is
broken). `VersionsResult` holds the runs (oldest release first) and the conclusions the search drew
(`analysis.versions.conclude`): the release that fixed it and the one that broke it, each as a `Boundary`
between two releases that were run (`exact` when no release between them exists in the list searched).
"""

from __future__ import annotations

from enum import Enum

import msgspec


class ReleaseOutcome(str, Enum):
    """How the repro ended under one release, against its failure under the user's release."""

    FAILS_SAME = "fails_same"
    PASSES = "passes"
    FAILS_OTHER = "fails_other"
    CANNOT_RUN = "cannot_run"


OUTCOME_WORDS = {ReleaseOutcome.FAILS_SAME: "fails the same way", ReleaseOutcome.PASSES: "passes",
                 ReleaseOutcome.FAILS_OTHER: "fails otherwise", ReleaseOutcome.CANNOT_RUN: "cannot run"}


class ReleaseRun(msgspec.Struct, frozen=True):
    """The repro under torch `release` (the public version, `2.14.1`). `torch` is the version the
    environment imported (`2.14.1+cu130`), `build` `cpu` or `cuda X.Y`; `signature` the normalised failure
    (empty when it passed); `why` the error it failed otherwise with, or why it could not run. `install_s`
    is the time spent making the environment in this search (None: it was there already, or it is the
    user's own), `run_s` the repro's run; `env` the environment's directory (empty: the user's interpreter)."""

    release: str
    outcome: ReleaseOutcome
    torch: str = ""
    build: str = ""
    signature: str = ""
    why: str = ""
    install_s: float | None = None
    run_s: float = 0.0
    env: str = ""


class Boundary(msgspec.Struct, frozen=True):
    """Where the outcome changes: `before` is the last release run on one side, `after` the first on the
    other; `exact` when they are neighbours in the list of releases searched."""

    before: str
    after: str
    exact: bool


class VersionsResult(msgspec.Struct, frozen=True):
    """The search over torch releases for one repro: `releases` the list searched (oldest first), `runs` those
    that were run (oldest first); `fixed` where it starts passing after the user's release (`after` is the
    release to upgrade to), `regressed` where it starts failing the same way after a release where it
    passed; `stopped` says why the search ended before it could conclude (budget, disk), `note` anything
    else the user should know (how the list was found, a build that differs from theirs)."""

    repro: str
    target: str
    user_release: str
    releases: tuple[str, ...] = ()
    runs: tuple[ReleaseRun, ...] = ()
    fixed: Boundary | None = None
    regressed: Boundary | None = None
    stopped: str = ""
    notes: tuple[str, ...] = ()
    time_s: float = 0.0
    args: tuple[str, ...] = ()  # the repro's own argv (a whole program run as `pt2doctor versions SCRIPT ARGS`)

    def run_of(self, release: str) -> ReleaseRun | None:
        return next((r for r in self.runs if r.release == release), None)


class TorchProbe(msgspec.Struct, frozen=True):
    """What an interpreter's `import torch` gives (printed by the probe `versions.torch_envs` runs in it):
    torch's version, the CUDA it was built for (None: a CPU build), where it was imported from, and the
    interpreter's `sys.prefix`."""

    version: str
    cuda: str | None
    file: str
    prefix: str


class TorchEnv(msgspec.Struct, frozen=True):
    """A cached environment made for one release (its `pt2doctor-env.json`: present only once the install
    finished and the probe imported torch from it): what pip was asked for, what it gave, how long it took."""

    release: str
    requirement: str
    torch: str
    cuda: str | None
    python: str
    install_s: float

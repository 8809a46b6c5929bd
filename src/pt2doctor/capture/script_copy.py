"""Changes tried on copies of the user's script, one after another, never on the user's file.

Contract: `write_copy(script, folder, text) -> Path` writes `text` as `folder/<the script's name>`;
`copy_env(script, env)` is `env` with the script's directory first on `PYTHONPATH`, so a copy elsewhere
imports what the script imports. `try_in_turn(candidates, run, judge, status)` runs each candidate
(`run`), judges the run (`judge` -> `ChangeVerdict`: verified or not, in words, and whether it settles the
question) and stops at the first that settles it; every candidate tried comes back, in order, with its
run and its verdict. It knows nothing of what a candidate is or how it runs: an export fix
(`export.diagnose.verify`: edits of the script, each in a copy, judged by the export call that failed),
a workaround (`diagnose.workarounds`), a configuration change (`--try-fixes`: the unchanged script
under overrides) each bring their run and their rule; the order, the stop and the record are the same.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

C = TypeVar("C")
R = TypeVar("R")


def write_copy(script: Path, folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / script.name
    copy.write_text(text)
    return copy


def copy_env(script: Path, env: Mapping[str, str]) -> dict[str, str]:
    """`env` (the copy's own additions) with PYTHONPATH: the script's directory, then this process's path."""
    path = os.pathsep.join(p for p in (str(script.resolve().parent), os.environ.get("PYTHONPATH", "")) if p)
    return {**env, "PYTHONPATH": path}


@dataclass(frozen=True, slots=True)
class ChangeVerdict:
    verified: bool
    outcome: str  # what the run with the change did, in words
    settles: bool = False  # no later candidate is tried


@dataclass(frozen=True, slots=True)
class Tried(Generic[C, R]):
    candidate: C
    run: R
    verdict: ChangeVerdict


def try_in_turn(candidates: Iterable[C], run: Callable[[C], R], judge: Callable[[C, R], ChangeVerdict],
                status: Callable[[C], None] = lambda _candidate: None) -> list[Tried[C, R]]:
    tried: list[Tried[C, R]] = []
    for candidate in candidates:
        status(candidate)
        result = run(candidate)
        tried.append(Tried(candidate, result, judge(candidate, result)))
        if tried[-1].verdict.settles:
            break
    return tried

"""Which torch releases to try a repro under, in what order, and what their outcomes say.

Contract (pure functions, no runs):
- `release_key("2.14.1+cu130")` orders releases (`(2, 14, 1)`); `public` drops the local part.
- `search_list(available, user, asked)` is the list searched, oldest first: by default the user's release
  and every final release newer than it that pip lists; `asked` names releases or ranges (`2.11.0..2.14.1`,
  resolved against `available`) instead, the user's release always included.
- `next_release(releases, tried)` is the next release to run, or None when the search is done: the newest
  release that can run first (the upgrade answer), then the oldest, then, between two releases that were
  run and ended differently, the middle of the untried ones (bisection). Releases between two that ended
  alike are not run: they are assumed to end alike too, so a fix or a regression costs about log2 of the
  releases between. A release that could not run is left out and another is tried in its place. Each call
  names a release not tried yet, so the search ends.
- `conclude(releases, runs, user)` draws the boundaries: `fixed`, from the last release at or after the
  user's that did not pass to the first newer one that passes; `regressed`, from a release that passed to
  the first later one that fails the same way.
- `outcome_of(signature, target)` judges one run; `requirement(release, user_torch, available)` is what pip
  is asked for, the user's build (the local version, `+cpu`) where the index has it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from pt2doctor.model.versions import Boundary, ReleaseOutcome, ReleaseRun

_FINAL = re.compile(r"\d+(?:\.\d+)*")
_LEADING = re.compile(r"\d+(?:\.\d+)*")


def public(version: str) -> str:
    """`2.13.0+cpu` -> `2.13.0`."""
    return version.split("+", 1)[0].strip()


def local_part(version: str) -> str:
    """`2.13.0+cpu` -> `cpu`; empty without one."""
    return version.partition("+")[2].strip()


def release_key(version: str) -> tuple[int, ...]:
    """The numeric release of a version (`2.15.0a0+git1234` -> `(2, 15, 0)`), for ordering."""
    match = _LEADING.match(public(version))
    return tuple(int(part) for part in match.group(0).split(".")) if match else ()


def is_final(version: str) -> bool:
    """A final release (`2.14.1`, `2.13.0+cpu`), not a pre-release or a development build."""
    return bool(_FINAL.fullmatch(public(version)))


def search_list(available: Iterable[str], user: str, asked: Sequence[str] = ()) -> tuple[str, ...]:
    finals = {public(v) for v in available if is_final(v)}
    mine = public(user)
    chosen = {mine} | (set(_expand(asked, finals)) if asked else
                       {v for v in finals if release_key(v) >= release_key(mine)})
    return tuple(sorted(chosen, key=release_key))


class UnknownRelease(ValueError):
    """A release or range asked for that names nothing pip lists."""


def _expand(asked: Sequence[str], finals: set[str]) -> list[str]:
    out: list[str] = []
    for item in asked:
        low, dots, high = item.partition("..")
        if not dots:
            out.append(public(item))
            continue
        lo, hi = release_key(low) if low else (), release_key(high) if high else (10**9,)
        within = [v for v in finals if lo <= release_key(v) <= hi]
        if not within:
            raise UnknownRelease(f"no release pip lists lies in {item}")
        out += within
    return out


def next_release(releases: Sequence[str], tried: Mapping[str, ReleaseOutcome]) -> str | None:
    usable = [r for r in releases if tried.get(r) is not ReleaseOutcome.CANNOT_RUN]
    if not usable:
        return None
    for end in (usable[-1], usable[0]):  # newest first: whether an upgrade fixes it
        if end not in tried:
            return end
    ran = [r for r in usable if r in tried]
    for a, b in zip(ran, ran[1:]):
        if tried[a] is not tried[b]:
            between = [r for r in usable[usable.index(a) + 1:usable.index(b)] if r not in tried]
            if between:
                return between[len(between) // 2]
    return None


def conclude(releases: Sequence[str], runs: Iterable[ReleaseRun], user: str
             ) -> tuple[Boundary | None, Boundary | None]:
    """(fixed, regressed): see the module docstring."""
    order = {r: i for i, r in enumerate(releases)}
    ran = sorted((r for r in runs if r.outcome is not ReleaseOutcome.CANNOT_RUN and r.release in order),
                 key=lambda r: order[r.release])
    return _fixed(ran, order, public(user)), _regressed(ran, order)


def _boundary(before: ReleaseRun, after: ReleaseRun, order: Mapping[str, int]) -> Boundary:
    return Boundary(before.release, after.release, order[after.release] - order[before.release] == 1)


def _fixed(ran: list[ReleaseRun], order: Mapping[str, int], user: str) -> Boundary | None:
    if user not in order:
        return None
    newer = [r for r in ran if order[r.release] >= order[user]]
    for before, after in zip(newer, newer[1:]):
        if after.outcome is ReleaseOutcome.PASSES and before.outcome is not ReleaseOutcome.PASSES:
            return _boundary(before, after, order)
    return None


def _regressed(ran: list[ReleaseRun], order: Mapping[str, int]) -> Boundary | None:
    passed: ReleaseRun | None = None
    for run in ran:
        if run.outcome is ReleaseOutcome.PASSES:
            passed = run
        elif run.outcome is ReleaseOutcome.FAILS_SAME and passed is not None:
            return _boundary(passed, run, order)
    return None


def outcome_of(signature: str | None, target: str) -> ReleaseOutcome:
    if signature is None:
        return ReleaseOutcome.PASSES
    return ReleaseOutcome.FAILS_SAME if signature == target else ReleaseOutcome.FAILS_OTHER


def requirement(release: str, user_torch: str, available: Iterable[str]) -> str:
    """`torch==2.14.1+cpu` where the index lists the user's build of the release, else `torch==2.14.1`
    (pip's default build; which one it was is read from the environment afterwards)."""
    local = local_part(user_torch)
    wanted = f"{release}+{local}"
    return f"torch=={wanted}" if local and wanted in set(available) else f"torch=={release}"


def build_of(cuda: str | None) -> str:
    """`cpu`, or `cuda 13.0`: what the installed torch was built for."""
    return f"cuda {cuda}" if cuda else "cpu"


def build_note(user_build: str, run: ReleaseRun) -> str | None:
    """A word when a release ran as another build than the user's (the index lists no build like theirs)."""
    if not run.build or run.build == user_build or run.outcome is ReleaseOutcome.CANNOT_RUN:
        return None
    runs_here = "; it runs on the CPU too" if user_build == "cpu" else ""
    return (f"torch {run.release} ran as its {run.build} build ({run.torch}), yours is a {user_build} build (pip "
            f"installs the build your index lists){runs_here}")

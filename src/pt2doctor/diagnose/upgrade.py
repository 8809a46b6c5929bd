"""`diagnose --versions`: the verified repro under other torch releases, and the upgrade that fixes it.

Contract: the step `versions` (`wanted` when `--versions` was given) runs after the hand-over step, once the
repro is verified and the workarounds on copies of the script were tried (it needs repro.py as it is handed
over); `check_versions(options, found, reporter)` is its work. With `options.versions` unset,
or no verified repro, it does nothing (a note says why when it was asked for). Otherwise it runs the
search (`versions.search.search_versions`, its logs in `out_dir/versions/`) and returns it as an
`Upgrade` (`diagnose.reported`); when a newer release fixes it, "upgrade torch to X" goes first among the workarounds,
verified on the repro only (`Workaround.verified_on == "repro"`): repro.py passed there, the whole program
was not run under it. A regression is said in the notes, with the last release where the repro passed.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from pt2doctor.capture.runner import Reporter
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.options import DiagnoseOptions
from pt2doctor.diagnose.reported import HandOver, Upgrade
from pt2doctor.diagnose.step import Context
from pt2doctor.model.diagnosis import Workaround
from pt2doctor.model.versions import VersionsResult


def wanted(ctx: Context, found: Found) -> bool:
    return ctx.options.versions is not None


def versions(ctx: Context, found: Found, hand_over: HandOver) -> Upgrade | None:
    """The step (after the hand-over: repro.py as handed over, the workarounds tried)."""
    return check_versions(ctx.options, found, ctx.reporter)


def check_versions(options: DiagnoseOptions, found: Found, reporter: Reporter) -> Upgrade | None:
    if options.versions is None:
        return None
    repro = _verified_repro(found)
    if repro is None:
        found.notes.append("--versions: no verified repro.py to run under other torch releases")
        return None
    from pt2doctor.versions.search import search_versions

    result = search_versions(repro, options.versions, options.out_dir / "versions", reporter)
    if result.regressed is not None:
        r = result.regressed
        between = "" if r.exact else " (releases between them were not run)"
        found.notes.append(f"regressed in torch {r.after}: repro.py passes under torch {r.before} and fails the same "
                           f"way under {r.after}{between}")
    return Upgrade(result, upgrade_workaround(result, found.command))


def upgrade_workaround(result: VersionsResult, command: tuple[str, ...] = ()) -> Workaround | None:
    """"Upgrade torch to X" where release X is the first after the user's where the repro passes; `command`
    (the script and its argv) is named in the command that runs the whole program under X, when asked."""
    if result.fixed is None:
        return None
    release = result.fixed.after
    run = result.run_of(release)
    build = f" ({run.torch}, {run.build} build)" if run is not None and run.torch else ""
    whole = (f" (`pt2doctor versions --releases {release} {shlex.join(command)}` runs it there, in the same cached "
             "environment)") if command else ""
    return Workaround(change=f"upgrade torch to {release}", patch="", verified=True,
                      outcome=f"repro.py passes under torch {release}{build}, run twice in an environment of its own; "
                              f"your whole program was not run under it{whole}", verified_on="repro")


def _verified_repro(found: Found) -> Path | None:
    """repro.py as handed over (the short form, else the chosen repro), when it verified."""
    chosen = found.chosen_repro()
    if chosen is None or not chosen.verified:
        return None
    return Path(found.short.repro if found.short is not None and chosen is found.minify else chosen.repro_path)

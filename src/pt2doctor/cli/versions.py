"""`pt2doctor versions [OPTIONS] REPRO`: a repro under other torch releases (which fixes it, which broke it);
`pt2doctor versions --clear-cache` empties the cache of their environments.

Parsing, progress and printing only: the search is `versions.search`, its words `report.versions`. The
options that say what the search may do (`versions_options`) are shared with `diagnose --versions`.
Exit status: 0 the search ran (whatever it found; versions.json says it), 2 REPRO passes under your own
torch (nothing to look for), 64 usage, 70 internal, 130 Ctrl-C.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from pt2doctor.cli.options import POSITIVE, SCRIPT_COMMAND, SECONDS, out_option
from pt2doctor.cli.output import summary_console
from pt2doctor.cli.progress import TerminalReporter
from pt2doctor.cli.run import default_out_dir
from pt2doctor.model.exit_codes import ExitCode
from pt2doctor.model.versions import ReleaseOutcome, VersionsResult
from pt2doctor.report.versions import COLUMNS, conclusions, release_rows
from pt2doctor.versions.options import DEFAULT_BUDGET_S, DEFAULT_MIN_FREE_GB, DEFAULT_RUN_TIMEOUT_S, VersionsSettings
from pt2doctor.versions.torch_envs import clear_cache, default_cache_dir

_COLORS = {"fails the same way": "red", "passes": "green", "fails otherwise": "yellow", "cannot run": "dim"}


def _torch_env(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[tuple[str, Path], ...]:
    out = []
    for value in values:
        release, eq, path = value.partition("=")
        if not eq or not release or not path:
            raise click.BadParameter(f"{value!r}: write VERSION=PATH (2.14.1=/path/to/venv)", ctx, param)
        out.append((release.strip(), Path(path).expanduser()))
    return tuple(out)


def _releases(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in (value or "").split(",") if v.strip())


def versions_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """What a search over torch releases may do: which releases, where the environments go, how much."""
    for decorator in reversed((
        click.option("--releases", callback=_releases, default=None, metavar="LIST",
                     help="Releases to try, comma-separated; A..B is every release pip lists from A to B. "
                          "Default: yours up to the newest pip can install, searched by bisection."),
        click.option("--versions-cache", type=click.Path(file_okay=False, path_type=Path), default=None,
                     help=f"Where the torch environments are kept and reused. Default: {default_cache_dir()}."),
        click.option("--torch-env", "torch_envs", multiple=True, callback=_torch_env, metavar="VERSION=PATH",
                     help="Use this existing environment (a venv, or its python) for that release instead of "
                          "installing one; nothing is installed into it. Repeatable."),
        click.option("--versions-budget", type=SECONDS, default=DEFAULT_BUDGET_S, show_default=True,
                     help="Seconds for the whole search, installs included; it stops and says so when they run out."),
        click.option("--min-free-gb", type=POSITIVE, default=DEFAULT_MIN_FREE_GB, show_default=True,
                     help="Stop installing when the disk under the cache has less than this free (GB)."),
    )):
        fn = decorator(fn)
    return fn


def settings_of(releases: tuple[str, ...], versions_cache: Path | None, torch_envs: tuple[tuple[str, Path], ...],
                versions_budget: float, min_free_gb: float, timeout: float | None = None) -> VersionsSettings:
    base = VersionsSettings()
    return VersionsSettings(releases=releases, cache_dir=(versions_cache or base.cache_dir).absolute(),
                            budget_s=versions_budget, min_free_gb=min_free_gb,
                            run_timeout_s=timeout or base.run_timeout_s, torch_envs=torch_envs)


@click.command("versions", context_settings=SCRIPT_COMMAND,
               short_help="Which torch release fixes a repro, and which one broke it.",
               epilog="Exit status: 0 the search ran (versions.json says what it found), 2 REPRO passes under your "
                      "own torch, 64 usage error, 70 internal error of pt2doctor, 130 Ctrl-C.")
@out_option("Where to write versions.json and the logs of each release's install and runs.")
@click.option("--timeout", type=SECONDS, default=None,
              help=f"Stop one run of the repro after this many seconds (default {DEFAULT_RUN_TIMEOUT_S:.0f}).")
@versions_options
@click.option("--clear-cache", is_flag=True, help="Remove every cached torch environment, then exit.")
@click.option("--json", "as_json", is_flag=True, help="Print versions.json to stdout.")
@click.argument("repro", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def versions_command(out_dir: Path | None, timeout: float | None, releases: tuple[str, ...],
                     versions_cache: Path | None, torch_envs: tuple[tuple[str, Path], ...], versions_budget: float,
                     min_free_gb: float, clear_cache: bool, as_json: bool, repro: Path | None,
                     args: tuple[str, ...]) -> int:
    """Run REPRO [ARGS] (a script that fails now: `diagnose`'s repro.py, or your whole program) under other torch
    releases, each in a cached environment of its own, and say which release fixes it and which one broke it."""
    from pt2doctor.model.serialize import dumps, write_record
    from pt2doctor.versions.search import search_versions

    settings = settings_of(releases, versions_cache, torch_envs, versions_budget, min_free_gb, timeout)
    console = summary_console(as_json=as_json)
    if clear_cache:
        return _clear(console, settings.cache_dir)
    if repro is None:
        raise click.UsageError("name the REPRO to run (or --clear-cache)")
    out = (out_dir or default_out_dir(repro, "versions")).absolute()
    result = search_versions(repro, settings, out, TerminalReporter(), args)
    write_record(out / "versions.json", result)
    if as_json:
        click.echo(dumps(result, pretty=True).decode())
    print_versions(console, result)
    console.print(f"wrote {out / 'versions.json'}", markup=False)
    return ExitCode.REPRO_PASSES if _passes_under_yours(result) else ExitCode.OK


def _passes_under_yours(result: VersionsResult) -> bool:
    yours = result.run_of(result.user_release)
    return yours is not None and yours.outcome is ReleaseOutcome.PASSES


def _clear(console: Console, cache: Path) -> int:
    freed = clear_cache(cache, lambda p: console.print(f"removing {p}", markup=False))
    console.print(f"cleared {cache}: {freed / 1024 ** 3:.1f} GB freed", markup=False)
    return ExitCode.OK


def print_versions(console: Console, result: VersionsResult) -> None:
    """The releases' table and what it says (`diagnose` prints it too)."""
    table = Table(title=f"torch releases: python {Path(result.repro).name} under each", show_header=True,
                  header_style="bold")
    for column in COLUMNS:
        table.add_column(column, overflow="fold")
    for row in release_rows(result):
        color = _COLORS.get(row["outcome"], "")
        table.add_row(*(f"[{color}]{row[c]}[/]" if c == "outcome" and color else _plain(row[c]) for c in COLUMNS))
    console.print(table)
    for line in conclusions(result):
        console.print(f"-> {line}", markup=False)


def _plain(text: str) -> str:
    from rich.markup import escape

    return escape(text)

"""The options every subcommand shares, defined once so they are spelled, checked and explained alike.

Contract: decorators and click types only; no work. A bad value is a usage error (exit 64) raised
before any script runs: an `--out` that is a file or cannot be written, a tolerance or timeout that is
not positive, an option that was mistyped where the script should be (`run --bogus` is not a script).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from pt2doctor.diagnose.options import DEFAULT_PROGRAM_BUDGET_S
from pt2doctor.model.minify import DEFAULT_TOLERANCE
from pt2doctor.model.settings import JOBS_DEFAULT_WORDS, default_jobs

SECONDS = click.FloatRange(min=0, min_open=True)  # a --timeout: a positive number of seconds
POSITIVE = click.FloatRange(min=0, min_open=True)
SCRIPT_COMMAND = {"ignore_unknown_options": True, "allow_interspersed_args": False,
                  "help_option_names": ["-h", "--help"]}
DEFAULT_RUN_DIR = "pt2doctor-runs/SCRIPT-LABEL-YYYYmmdd-HHMMSS"

# the forms a command that runs a script (as a job too) is typed in, said in its --help (issue 40, point 3)
SCRIPT_FORMS = ("pt2doctor's options go before SCRIPT: everything after SCRIPT is the script's own arguments, passed "
                "on unchanged. A job of several ranks: `--nproc-per-node N SCRIPT [ARGS]` (torchrun, standalone, one "
                "node), or `-- torchrun [TORCHRUN FLAGS] SCRIPT [ARGS]` with torchrun's own flags (--nnodes, "
                "--rdzv-backend, --rdzv-endpoint: one pt2doctor per node, each writing its ranks' directories; "
                "docs/guide/multi-rank-jobs.md).")

RUN_EXIT_CODES = ("Exit status: as `python SCRIPT` (0, or the script's own code; 128+N when it died of signal N), "
                  "124 stopped at --timeout, 130 Ctrl-C, 64 usage error, 70 internal error of pt2doctor.")


class OutDir(click.Path):
    """A directory pt2doctor may create and write: not an existing file, and its nearest existing parent
    writable. Checked before the script runs, so a typo never costs a run."""

    name = "directory"

    def __init__(self) -> None:
        super().__init__(path_type=Path, file_okay=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        path = Path(super().convert(value, param, ctx)).absolute()  # type: ignore[arg-type]  # path_type=Path: never bytes
        existing = next(p for p in (path, *path.parents) if p.exists())
        if not existing.is_dir():
            self.fail(f"{existing} is a file, so {path} cannot be a directory", param, ctx)
        try:  # by trying: permission bits say nothing to root, and a read-only mount says nothing in them
            path.mkdir(parents=True, exist_ok=True)
            tempfile.TemporaryFile(dir=path).close()
        except OSError as exc:
            self.fail(f"{path} cannot be written: {exc.strerror or exc}", param, ctx)
        return path


class ScriptPath(click.Path):
    """The script to run. Something that looks like an option and is no file is a mistyped option:
    options go before SCRIPT, everything after it is the script's own argv."""

    name = "script"

    def __init__(self) -> None:
        super().__init__(path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        if isinstance(value, str) and value.startswith("-") and not Path(value).exists():
            import difflib

            known = [name for p in (ctx.command.params if ctx else ()) for name in getattr(p, "opts", ())
                     if name.startswith("-")]
            # as click's own parser says it: `Did you mean --timeout?`
            raise click.NoSuchOption(value.split("=", 1)[0], possibilities=difflib.get_close_matches(
                value.split("=", 1)[0], known, n=1, cutoff=0.7), ctx=ctx)
        return Path(super().convert(value, param, ctx))  # type: ignore[arg-type]  # path_type=Path: never bytes


def _apply(fn: Callable[..., Any], decorators: tuple[Callable[..., Any], ...]) -> Callable[..., Any]:
    for decorator in reversed(decorators):
        fn = decorator(fn)
    return fn


def out_option(help_text: str = "Run directory (session.json, trace).") -> Callable[..., Any]:
    return click.option("--out", "out_dir", type=OutDir(), default=None,
                        help=f"{help_text} Default: {DEFAULT_RUN_DIR}.")


timeout_option = click.option("--timeout", type=SECONDS, default=None, help="Stop the script after this many seconds.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON to stdout instead of the summary.")
html_option = click.option("--html", "html", is_flag=True, help="Also write DIR/report.html (one self-contained page).")
strict_option = click.option("--strict", is_flag=True, help="Fail on unreadable trace lines instead of skipping them.")
tolerance_option = click.option("--tol", "--tolerance", "tolerance", type=POSITIVE, default=DEFAULT_TOLERANCE,
                                show_default=True, help="Tolerance of PyTorch's fp64-referenced accuracy rule.")
program_budget_option = click.option(
    "--program-budget", "program_budget", type=SECONDS, default=DEFAULT_PROGRAM_BUDGET_S, show_default=True,
    help="Seconds to spend reducing the program itself, when no graph shows the failure (a Dynamo bug) or no graph "
         "repro verifies.")
jobs_option = click.option("--jobs", type=click.IntRange(min=1), default=default_jobs,
                           show_default=f"{JOBS_DEFAULT_WORDS}: {default_jobs()} here",
                           help="How many runs of the script, minifier queries and verifications go at once.")


def script_arguments(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`SCRIPT [ARGS]...`: the script and its own argv, passed through untouched; where one of them is also an option
    of the command (`diagnose SCRIPT --out DIR`), a note on stderr says it went to the script."""
    return _apply(fn, (click.argument("script", type=ScriptPath()),
                       click.argument("args", nargs=-1, type=click.UNPROCESSED, callback=_said_to_the_script)))


def _said_to_the_script(ctx: click.Context, param: click.Parameter, args: tuple[str, ...]) -> tuple[str, ...]:
    own = {name for p in ctx.command.params for name in getattr(p, "opts", ()) if name.startswith("--")}
    theirs = [arg for arg in args if arg.split("=", 1)[0] in own]
    if theirs:
        click.echo(f"pt2doctor: note: {', '.join(theirs)} after SCRIPT went to the script, as its own arguments; "
                   f"{ctx.info_name}'s options go before SCRIPT", err=True)
    return args


def run_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--out, --timeout, --json, --html, --strict: what every command that runs a script takes."""
    return _apply(fn, (out_option(), timeout_option, json_option, html_option, strict_option))

"""`pt2doctor minify RUN_DIR`: reduce the run's failing graph to a verified minimal repro.

Parsing and dispatch only: loading is `reduce.fx_load`, reducing `reduce.fx_minify`; progress
goes through `MinifyProgress`, a reporter handed to the reducer. The worker pool and the verifying
interpreter start before torch is imported here, so their start-up overlaps loading. Exit status: 0 verified repro,
1 repro written but not verified, 3 nothing to minify or the failure does not reproduce, 64 RUN_DIR is no
recording, 65 the recording cannot be read, 130 interrupted (the best repro so far is written).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console

from pt2doctor.cli.options import SECONDS, OutDir, jobs_option, tolerance_option
from pt2doctor.cli.output import summary_console
from pt2doctor.model.exit_codes import ExitCode
from pt2doctor.model.serialize import dumps

if TYPE_CHECKING:
    from pt2doctor.model import Session
    from pt2doctor.model.minify import MinifyResult
    from pt2doctor.processes.workers import Workers
    from pt2doctor.reduce.fx_minify import MinifyOutcome


class MinifyProgress:
    """Live progress on stderr: pass, nodes left, queries, cache hits."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.started = time.monotonic()
        self.status = console.status("starting workers")
        self.status.start()

    def progress(self, pass_name: str, size: int, queries: int, cache_hits: int) -> None:
        elapsed = time.monotonic() - self.started
        self.status.update(f"{pass_name}: {size} nodes left, {queries} queries ({cache_hits} cached), {elapsed:.1f}s")

    def stop(self) -> None:
        self.status.stop()


def _minify(run_dir: Path, script: Path | None, out_dir: Path, jobs: int, timeout_s: float, accuracy: bool,
            tolerance: float, console: Console, workers: Workers) -> MinifyOutcome:
    from pt2doctor.capture.recorded_run import record_script
    from pt2doctor.reduce.fx_load import NothingToMinify, load_failing
    from pt2doctor.reduce.fx_minify import MinifyOptions, minify_case

    if script is not None:  # a negative status: the signal the run died of
        status = record_script(script, run_dir, accuracy_tolerance=tolerance if accuracy else None)
        died_of_signal = status is not None and status < 0
    else:  # a run recorded by `pt2doctor run --record`: its session says how it ended
        session = _recorded_session(run_dir)
        died_of_signal = session is not None and session.exit.signal is not None
    try:
        recorded = load_failing(run_dir, accuracy=accuracy, tolerance=tolerance, out_dir=out_dir,
                                died_of_signal=died_of_signal)
    except NothingToMinify:
        raise
    except Exception as exc:  # a file of the recording cut short or damaged: bad input, not our bug
        first = (str(exc).splitlines() or [""])[0][:300]
        raise DamagedRun(f"{run_dir} cannot be read: {type(exc).__name__}: {first} (a recording cut short or "
                         "edited?); record it again with `pt2doctor run --record SCRIPT`") from exc
    options = MinifyOptions(out_dir, jobs, timeout_s, expected=recorded.expected, graph_name=recorded.graph_id)
    progress = MinifyProgress(console)
    try:
        return minify_case(recorded.case, recorded.context, options, progress, workers=workers)
    finally:
        progress.stop()


class DamagedRun(click.ClickException):
    exit_code = ExitCode.DATA


@click.command("minify", short_help="Minify RUN_DIR's failing graph to repro.py.",
               epilog="Exit status: 0 a verified repro, 1 a repro that could not be verified, 3 nothing failed in the "
                      "recording or the graph does not fail alone, 65 the recording cannot be read, 130 Ctrl-C, "
                      "64 usage error.", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option("--out", type=OutDir(), help="Where to write repro.py and minify.json (default: RUN_DIR).")
@click.option("--timeout", "timeout_s", type=SECONDS, default=120.0, show_default=True, help="Seconds per query.")
@jobs_option
@click.option("--accuracy", is_flag=True, help="Minify a wrong-result failure (fp64-referenced check).")
@tolerance_option
@click.option("--script", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="First run SCRIPT with the graph recorder into RUN_DIR.")
@click.option("--json", "as_json", is_flag=True, help="Print minify.json to stdout.")
def minify_command(run_dir: Path, out: Path | None, timeout_s: float, jobs: int, accuracy: bool,
                   tolerance: float, script: Path | None, as_json: bool) -> None:
    """Reduce RUN_DIR's failing graph to a minimal repro.py, verified in a fresh interpreter."""
    from pt2doctor.processes.workers import start_workers

    console = Console(stderr=True, highlight=False)
    if script is None and not (run_dir / "graphs").is_dir():
        raise click.UsageError(f"{run_dir} holds no recorded graphs: give a directory written by "
                               "`pt2doctor run --record SCRIPT` (or pass --script SCRIPT to record it first)")
    out_dir = out or run_dir
    # Workers first (no torch imported yet): their warm-up overlaps recording and loading.
    with start_workers(jobs, timeout_s, out_dir) as workers:
        from pt2doctor.reduce.fx_load import NothingToMinify
        from pt2doctor.reduce.fx_minify import CannotReproduce

        try:
            outcome = _minify(run_dir, script, out_dir, jobs, timeout_s, accuracy, tolerance, console, workers)
        except (NothingToMinify, CannotReproduce) as exc:
            console.print(f"pt2doctor minify: {exc}", markup=False)
            if isinstance(exc, NothingToMinify) and _failed_with_async_cuda_error(run_dir):
                console.print("The run failed with a CUDA kernel error, which CUDA reports after the graph that "
                              "launched it has returned. Record it with launches synchronous (`CUDA_LAUNCH_BLOCKING=1 "
                              "pt2doctor run --record SCRIPT`), or let `pt2doctor diagnose SCRIPT` do it.")
            sys.exit(ExitCode.NOTHING_FAILED)
    result = outcome.result
    summary = summary_console(as_json=as_json)
    word = "minimal, verified" if result.minimal else ("verified" if result.verified else "NOT verified")
    if result.verify_runs is not None:
        word += f": {result.verify_runs} in fresh interpreters"
    summary.print(
        f"{result.signature}: {result.nodes_before} -> {result.nodes_after} nodes {list(result.ops)} "
        f"in {result.queries} queries, {result.time_s:.1f}s; repro ({word}): {result.repro_path}", markup=False,
    )
    _fold_into_session(run_dir, result)
    if as_json:
        click.echo(dumps(result, pretty=True).decode())
    if result.stopped_early == "interrupted":
        summary.print("interrupted: the repro is the smallest graph found so far, not a minimal one")
        sys.exit(ExitCode.INTERRUPTED)
    sys.exit(ExitCode.OK if result.verified else ExitCode.UNVERIFIED)


def _recorded_session(run_dir: Path) -> Session | None:
    """The recorded run's session.json, or None where there is none or it cannot be read."""
    from pt2doctor.report.document import ReportInputError, read_session_json

    try:
        return read_session_json(run_dir / "session.json")
    except (ReportInputError, OSError):
        return None


def _failed_with_async_cuda_error(run_dir: Path) -> bool:
    from pt2doctor.analysis.failures import asynchronous_cuda_error

    session = _recorded_session(run_dir)
    return session is not None and bool(session.failures) and asynchronous_cuda_error(session.failures[0])


def _fold_into_session(run_dir: Path, result: MinifyResult) -> None:
    """The run's session.json keeps the minification (`extras.minify`), so `report RUN_DIR` shows it."""
    from dataclasses import replace

    import msgspec

    from pt2doctor.capture.runner import save
    from pt2doctor.report.document import ReportInputError, read_session_json

    path = run_dir / "session.json"
    if not path.is_file():
        return
    try:
        session = read_session_json(path)
    except ReportInputError:
        return
    save(replace(session, extras=msgspec.structs.replace(session.extras, minify=result)), path)

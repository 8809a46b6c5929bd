"""`pt2doctor diagnose [--out DIR] [--timeout S] [--function NAME] [--nproc-per-node N] SCRIPT [ARGS...]`, and
`pt2doctor diagnose [OPTIONS] -- torchrun [FLAGS] SCRIPT.py [ARGS...]` for a job (`diagnose.ranks`).

Parsing, progress and printing only: the procedure is `diagnose.procedure`, the bundle
`report.issue`. Exit status: 0 nothing fails; 1 a compiler failure diagnosed (bundle written);
2 the script itself is at fault (`user_error`); 3 flaky; 130 interrupted (Ctrl-C), 143 SIGTERM, 129 SIGHUP
(what was found is written); 64 usage.
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from pt2doctor.capture.runner import ScriptError, check_script
from pt2doctor.cli.minify import MinifyProgress
from pt2doctor.cli.options import (
    SCRIPT_COMMAND,
    SCRIPT_FORMS,
    SECONDS,
    jobs_option,
    out_option,
    program_budget_option,
    script_arguments,
)
from pt2doctor.cli.output import summary_console
from pt2doctor.cli.progress import TerminalReporter
from pt2doctor.cli.run import default_out_dir, torchrun_of
from pt2doctor.cli.versions import print_versions, settings_of, versions_options
from pt2doctor.diagnose.options import DEFAULT_PROGRAM_BUDGET_S, DEFAULT_PROGRAM_PATIENCE
from pt2doctor.model.settings import default_jobs
from pt2doctor.versions.options import VersionsSettings


class _MinifyStatus(MinifyProgress):
    """The minifier's live line, started on its first report (the runs before it print lines of their own)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.status = None  # type: ignore[assignment]

    def progress(self, pass_name: str, size: int, queries: int, cache_hits: int) -> None:
        if self.status is None:
            import time

            self.started = time.monotonic()
            self.status = self.console.status("minifying")
            self.status.start()
        super().progress(pass_name, size, queries, cache_hits)

    def stop(self) -> None:
        if self.status is not None:
            self.status.stop()


@click.command("diagnose", context_settings=SCRIPT_COMMAND, short_help="Reproduce, classify and minify a failure.",
               help="Reproduce SCRIPT's torch.compile failure, find the failing stage, minify it, write an issue "
                    "bundle.\n\n" + SCRIPT_FORMS,
               epilog="Exit status: 0 nothing fails, 1 a compiler failure diagnosed (bundle written), 2 the script "
                      "itself is at fault, 3 flaky, 75 not diagnosed: other processes held the GPU's memory, "
                      "130 Ctrl-C, 143 SIGTERM, 129 SIGHUP (what was found so far is "
                      "written), 64 usage error, 70 internal error of pt2doctor. A diagnosis stopped at its --budget "
                      "exits as it would have concluded on what it found; 124 where it ran out before the failure was "
                      "reproduced.")
@out_option("Where to write repro.py, diagnosis.json, issue.md, report.html and the runs.")
@click.option("--timeout", type=SECONDS, default=None, help="Stop each run of the script after this many seconds.")
@click.option("--function", "function", default=None,
              help="Compile only functions of this name (TORCHDYNAMO_DEBUG_FUNCTION).")
@jobs_option
@click.option("--no-minify", is_flag=True, help="Stop after finding the stage.")
@click.option("--no-bisect", is_flag=True, help="Skip the CompilerBisector step.")
@click.option("--no-workarounds", is_flag=True, help="Do not try workarounds on copies of the script.")
@click.option("--cost", is_flag=True,
              help="Also run the script once with compilation off, to say what each verified workaround costs "
                   "against no compiler at all (one more run of the program).")
@click.option("--budget", type=SECONDS, default=None,
              help="Bound the whole diagnosis to this many seconds: the best found by then is handed over (the "
                   "verdict comes first, the repro and workarounds as time allows).")
@program_budget_option
@click.option("--program-patience", type=click.IntRange(min=0), default=DEFAULT_PROGRAM_PATIENCE, show_default=True,
              help="Stop reducing the program after this many candidates in a row kept nothing (0: the budget only).")
@click.option("--json", "as_json", is_flag=True, help="Print diagnosis.json to stdout.")
@click.option("--versions", "versions", is_flag=True,
              help="Also run the verified repro under other torch releases (each in a cached environment of its "
                   "own): which release fixes it (offered first as a workaround), which one broke it.")
@versions_options
@click.option("--nproc-per-node", type=click.IntRange(min=1), default=None,
              help="Run SCRIPT as a job of N ranks through torchrun (standalone) and diagnose the rank that fails "
                   "first.")
@script_arguments
def diagnose_command(out_dir: Path | None, timeout: float | None, function: str | None, jobs: int, no_minify: bool,
                     no_bisect: bool, no_workarounds: bool, cost: bool, budget: float | None, program_budget: float,
                     program_patience: int, as_json: bool,
                     versions: bool, releases: tuple[str, ...], versions_cache: Path | None,
                     torch_envs: tuple[tuple[str, Path], ...], versions_budget: float, min_free_gb: float,
                     nproc_per_node: int | None, script: Path, args: tuple[str, ...]) -> int:
    """Reproduce SCRIPT's torch.compile failure, find the failing stage, minify it, write an issue bundle."""
    from pt2doctor.model.serialize import dumps

    torchrun, script, args = torchrun_of(nproc_per_node, script, args)
    try:
        check_script(script)
    except ScriptError as exc:
        raise click.UsageError(str(exc)) from exc
    diagnosis = run_diagnosis(script, args, out=out_dir or default_out_dir(script, "diagnose"), timeout=timeout,
                              function=function, jobs=jobs, minify=not no_minify, bisect=not no_bisect,
                              workarounds=not no_workarounds, cost=cost, budget_s=budget,
                              program_budget_s=program_budget,
                              program_patience=program_patience or None, torchrun=torchrun,
                              versions=settings_of(releases, versions_cache, torch_envs, versions_budget, min_free_gb)
                              if versions else None, as_json=as_json)
    if as_json:
        click.echo(dumps(diagnosis, pretty=True).decode())
    return diagnosis.exit_code


def run_diagnosis(script: Path, args: tuple[str, ...], *, out: Path, timeout: float | None = None,
                  function: str | None = None, jobs: int | None = None, minify: bool = True,
                  bisect: bool = True, workarounds: bool = True, cost: bool = False, budget_s: float | None = None,
                  program_budget_s: float = DEFAULT_PROGRAM_BUDGET_S,
                  program_patience: int | None = DEFAULT_PROGRAM_PATIENCE,
                  torchrun: tuple[str, ...] | None = None,
                  versions: VersionsSettings | None = None,
                  as_json: bool = False):  # type: ignore[no-untyped-def]
    """Diagnose with live progress on stderr, write the bundle, print the summary; returns the Diagnosis."""
    from pt2doctor.capture import run_lock
    from pt2doctor.capture.report_inputs import collect_html_inputs
    from pt2doctor.diagnose.procedure import DiagnoseOptions, diagnose
    from pt2doctor.diagnose.stopping import shielded
    from pt2doctor.report.issue import bundle_session, write_bundle, write_diagnosis

    options = DiagnoseOptions(script=script, args=args, out_dir=out, timeout_s=timeout, function=function,
                              jobs=max(1, jobs or default_jobs()), minify=minify, bisect=bisect,
                              workarounds=workarounds,
                              program_budget_s=program_budget_s, program_patience=program_patience, torchrun=torchrun,
                              versions=versions, budget_s=budget_s, cost=cost)
    minify_status = _MinifyStatus(Console(stderr=True, highlight=False))
    try:
        with run_lock.claim(out):
            # diagnosis.json as it stands after every step: the verdict first, nothing lost if it is stopped
            diagnosis = diagnose(options, TerminalReporter(quiet=False), minify_status,
                                 publish=lambda so_far: write_diagnosis(so_far, out))
            with shielded():  # a second stop signal must not cut the bundle short
                session = bundle_session(out, diagnosis)
                written = write_bundle(diagnosis, session, out,
                                       collect_html_inputs(session) if session is not None else None)
    except run_lock.DirectoryBusy as exc:
        raise click.UsageError(str(exc)) from exc
    finally:
        minify_status.stop()
    print_diagnosis(summary_console(as_json=as_json), diagnosis, written)
    return diagnosis


def print_diagnosis(console: Console, d, written: list[Path]) -> None:  # type: ignore[no-untyped-def]
    style = "green" if not d.failed else "red"
    console.print(f"\n{d.headline}", style=f"bold {style}", markup=False)  # texts quote errors: no markup
    if d.stages:
        table = Table(title="stage -> result", show_header=True, header_style="bold")
        table.add_column("backend")
        table.add_column("result")
        for backend, result in d.stages.items():
            color = {"pass": "green", "fail": "red"}.get(result, "dim")
            table.add_row(backend, f"[{color}]{result}[/]")
        console.print(table)
    if d.user_frames:
        console.print("where: " + ", ".join(str(f) for f in d.user_frames[:3]), markup=False)
    fault = d.runtime.fault if d.runtime else None
    if fault is not None:
        console.print(f"first bad kernel: {fault.kernel} (graph {fault.graph}, {fault.kind.value}): {fault.words}",
                      markup=False)
        console.print(f"  fused ops: {', '.join(fault.ops) or '-'}", markup=False)
        for origin in fault.sources:
            console.print(f"  from {origin.describe()}", markup=False)
    if d.runtime and d.runtime.sanitizer:
        console.print(f"  {d.runtime.sanitizer.words}", markup=False)
    if d.bisection:
        console.print(f"bisection: {d.bisection.describe()}", markup=False)
    for ref in d.where_to_look:
        console.print(f"look at: {ref.describe()}", markup=False)
    if d.repro:
        runs = f": {d.repro_runs} in fresh interpreters" if d.repro_runs else ""
        word = ("verified" if d.repro_verified else "flaky" if d.repro_runs and d.repro_runs.flaky
                else "NOT verified") + runs
        p = d.program
        size = (f"the program reduced, {p.lines_before} -> {p.lines_after} lines" if p and d.repro == p.repro_path else
                f"{d.minified_nodes} node(s)")
        console.print(f"repro: {d.repro} ({size}: {', '.join(d.culprit_ops) or '-'}; {word})", markup=False)
        for origin in d.culprit_sources:
            console.print(f"  from {origin.describe()}", markup=False)
        for need in d.input_needs:
            console.print(f"  needs: {need.describe()}", markup=False)
        for change in (p.changes if p and d.repro == p.repro_path else ()):
            console.print(f"  un-guarded change between compiled calls: {change.statement} (writes {change.path})",
                          markup=False)
    if d.versions is not None:
        print_versions(console, d.versions)
    for note in d.notes:
        console.print(f"note: {note}", style="dim", markup=False)
    for step in d.next_steps:
        console.print(f"-> {step}", markup=False)
    timings = ", ".join(f"{k} {v:.1f}s" for k, v in d.timings.items())
    console.print(f"[dim]{timings}[/]")
    if d.runs is not None:
        console.print(f"runs: {d.runs.describe()}", style="dim", markup=False)
    if written:
        console.print("wrote " + ", ".join(str(p) for p in written), markup=False)
    console.file.flush()

"""Shared steps of `pt2doctor recompiles` and `pt2doctor explain`: the options of `run`, one run,
optional what-if trials, and the output (text, `--json`, `--html`).

Contract: `advisor_options` adds `run`'s options plus `--try-fixes`; `run_advisor` runs the script
once (with output recording when trials follow; `hooks`: what the child installs besides), proposes the trials whose
target is `target`, runs them, and prints `render(report)` followed by the trial results (`--json`: `digest(report)`
under the command's name, and `more(report)`'s keys). It returns the run's exit code.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from pt2doctor.analysis.whatif import Target, TrialResult, propose_trials
from pt2doctor.capture.runner import RunOptions, run_script
from pt2doctor.cli.options import run_options, script_arguments
from pt2doctor.cli.output import input_errors
from pt2doctor.cli.progress import TerminalReporter
from pt2doctor.cli.run import default_out_dir
from pt2doctor.model.child import Hooks
from pt2doctor.model.serialize import dumps, to_builtins
from pt2doctor.report.advice import render_trials
from pt2doctor.report.document import Report, build_report, save_report


def advisor_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = script_arguments(fn)
    fn = click.option("--try-fixes", is_flag=True, help="Re-run the script under each suggested config change "
                                                          "and report the measured effect.")(fn)
    return run_options(fn)


def run_advisor(label: str, target: Target, render: Callable[[Report], str],
                digest: Callable[[Report], Any], hooks: Hooks | None = None,
                more: Callable[[Report], dict[str, Any]] = lambda _report: {}, **kw: Any) -> int:
    script: Path = kw["script"]
    options = RunOptions(script=script, args=kw["args"], out_dir=kw["out_dir"] or default_out_dir(script, label),
                         timeout_s=kw["timeout"], stdout_to_stderr=kw["as_json"], strict=kw["strict"], label=label,
                         hooks=hooks or Hooks())
    reporter = TerminalReporter(quiet=False)
    with input_errors():
        from pt2doctor.workflows.whatif import baseline_options, try_fixes

        session = run_script(baseline_options(options) if kw["try_fixes"] else options, reporter)
        report = build_report(session)
        results: list[TrialResult] = []
        if kw["try_fixes"]:
            trials = [t for t in propose_trials(report.session) if t.target == target]
            results = try_fixes(report.session, options, trials, reporter)
    save_report(report, options.out_dir / "session.json")
    if kw["html"]:
        from pt2doctor.cli.output import write_html

        click.echo(f"pt2doctor: wrote {write_html(report, options.out_dir / 'report.html')}", err=True)
    if kw["as_json"]:
        doc = {"verdict": report.verdict.headline, label: to_builtins(digest(report)),
               **{key: to_builtins(value) for key, value in more(report).items()},
               "trials": to_builtins(results), "run_dir": str(options.out_dir)}
        sys.stdout.buffer.write(dumps(doc, pretty=True) + b"\n")
    else:
        click.echo(f"{report.verdict.headline}\n")
        click.echo(render(report))
        if kw["try_fixes"]:
            click.echo(render_trials(results))
        click.secho(f"run directory: {options.out_dir}", dim=True)
    return report.verdict.exit_code


"""`pt2doctor accuracy [--tol T] [--backend B] [--out --timeout --json --html --strict] SCRIPT [ARGS...]`.

Parsing and dispatch only: the work is `workflows.accuracy.check_accuracy`, the meaning
`analysis.accuracy`, the text `report.accuracy`. Exit status (`analysis.verdict.judged_exit_code`): 1 when a graph's
compiled results differ from eager beyond PyTorch's fp64-referenced tolerance without a known non-bug explaining it
(whether or not the script then failed), else 4 when the script itself failed, else 0; 124 and 130 as `run`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from pt2doctor.capture.runner import RunOptions
from pt2doctor.cli.options import SCRIPT_COMMAND, jobs_option, run_options, script_arguments, tolerance_option
from pt2doctor.cli.output import input_errors
from pt2doctor.cli.progress import TerminalReporter
from pt2doctor.cli.run import default_out_dir


@click.command("accuracy", context_settings=SCRIPT_COMMAND, short_help="Check compiled graphs against eager (fp64).",
               epilog="Exit status: 0 every compiled graph matches eager (or differs for a known reason), 1 a graph's "
                      "results are wrong with no known non-bug to explain it (whether or not the script then failed), "
                      "4 the script itself failed and no graph was judged wrong, 124 stopped at --timeout, "
                      "130 Ctrl-C, 64 usage error. The first line says which.")
@run_options
@tolerance_option
@click.option("--backend", default=None, help="Compile every torch.compile call with this backend instead.")
@click.option("--no-minify", "no_minify", is_flag=True, help="Do not minify the first failing graph.")
@jobs_option
@script_arguments
def accuracy_command(tolerance: float, backend: str | None, out_dir: Path | None, timeout: float | None,
                     as_json: bool, html: bool, strict: bool, no_minify: bool, jobs: int, script: Path,
                     args: tuple[str, ...]) -> int:
    """Compare every compiled graph of SCRIPT with eager against an fp64 reference; find the first divergent op."""
    from pt2doctor.analysis.accuracy import any_wrong
    from pt2doctor.analysis.accuracy import headline as accuracy_headline
    from pt2doctor.analysis.verdict import judged_exit_code
    from pt2doctor.cli.output import emit_report
    from pt2doctor.report.accuracy import render_accuracy
    from pt2doctor.report.document import build_report, save_report
    from pt2doctor.report.gate import render_gate
    from pt2doctor.workflows.accuracy import AccuracyOptions, check_accuracy

    if backend is not None:
        _check_backend(backend, script)
    run = RunOptions(script=script, args=args, out_dir=out_dir or default_out_dir(script, "accuracy"),
                     timeout_s=timeout, stdout_to_stderr=as_json, strict=strict, label="accuracy")
    options = AccuracyOptions(run, tolerance, backend, minify=not no_minify, jobs=jobs)
    with input_errors():
        session = check_accuracy(options, TerminalReporter(quiet=False))
    report = build_report(session)
    save_report(report, run.out_dir / "session.json")
    wrong = any_wrong(session.accuracy)
    # a wrong graph is judged before the script's own check fails on it: the judgement stands
    code = judged_exit_code(session, wrong, wrong_first=True)
    judged = accuracy_headline(session.accuracy).removeprefix("accuracy: ")
    if wrong and not session.exit.ok:
        judged += f"; the script then failed: {report.verdict.headline}"
    click.echo(render_gate("accuracy", code, wrong=f"WRONG: {judged}", right=judged, script=report.verdict.headline),
               err=as_json, nl=False)
    emit_report(report, as_json=as_json)  # the text includes the accuracy
    if as_json:
        click.echo(render_accuracy(session.accuracy), err=True)
    if html:
        from pt2doctor.cli.output import write_html

        click.echo(f"pt2doctor: wrote {write_html(report, run.out_dir / 'report.html')}", err=True)
    sys.stdout.flush()
    return code


def _check_backend(name: str, script: Path) -> None:
    """A backend torch does not know is a usage error, unless the script may register it itself (it names it)."""
    from pt2doctor.capture import torch_compat

    known = torch_compat.registered_backends()
    try:
        named_by_script = name in script.read_text(errors="replace")
    except OSError:
        named_by_script = False
    if name not in known and not named_by_script:
        raise click.BadParameter(f"torch has no backend {name!r}; known: {', '.join(sorted(known))}",
                                 param_hint="'--backend'")

"""`pt2doctor explain SCRIPT`: the deduplicated graph-break action list, most impact first; for a script that
exports, every issue torch.export's draft_export reports (each export call is draft-exported too, on
copies) and every exported program judged wrong in the run; `--try-fixes` tries the export fixes together
in a copy of the script (`export.diagnose.verify`)."""

from __future__ import annotations

from typing import Any

import click

from pt2doctor.analysis.cookbook import action_items
from pt2doctor.cli.advisor import advisor_options, run_advisor
from pt2doctor.cli.options import RUN_EXIT_CODES, SCRIPT_COMMAND
from pt2doctor.cli.progress import TerminalReporter
from pt2doctor.export.analysis.issues import ExportIssues, find_export_issues
from pt2doctor.export.report.advice import render_export_issues
from pt2doctor.model.child import Hooks
from pt2doctor.report.advice import render_actions
from pt2doctor.report.document import Report


@click.command("explain", context_settings=SCRIPT_COMMAND, short_help="Which lines break the graphs or the export, "
               "and the rewrites.", epilog=RUN_EXIT_CODES)
@advisor_options
def explain_command(**kw: Any) -> int:
    """Which lines break SCRIPT's graphs or its torch.export, why, and the rewrite (--try-fixes verifies config
    changes and the export fixes)."""
    found: dict[int, ExportIssues] = {}  # once per report: trying the fixes runs the script again

    def export(report: Report) -> ExportIssues:
        if id(report) not in found:
            issues = find_export_issues(report.session)
            if kw["try_fixes"] and issues.issues:
                from pt2doctor.export.diagnose.verify import verify_issue_fixes

                issues = verify_issue_fixes(issues, report.session, kw["timeout"], TerminalReporter(quiet=False))
            found[id(report)] = issues
        return found[id(report)]

    return run_advisor("explain", "graph_breaks", lambda r: _render(r, export(r)), lambda r: action_items(r.session),
                       hooks=Hooks(draft_export=True, export_checks=True), more=lambda r: {"export": export(r)}, **kw)


def _render(report: Report, issues: ExportIssues) -> str:
    exported = render_export_issues(issues)
    actions = action_items(report.session)
    if exported and not actions:
        return exported  # an export-only script: "No graph breaks." would say nothing about it
    return render_actions(actions) + ("\n" + exported if exported else "")

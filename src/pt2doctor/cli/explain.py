"""`pt2doctor explain SCRIPT`: the deduplicated graph-break action list, most impact first."""

from __future__ import annotations

from typing import Any

import click

from pt2doctor.analysis.cookbook import action_items
from pt2doctor.cli.advisor import advisor_options, run_advisor
from pt2doctor.cli.options import RUN_EXIT_CODES, SCRIPT_COMMAND
from pt2doctor.report.advice import render_actions


@click.command("explain", context_settings=SCRIPT_COMMAND, short_help="Which lines break the graphs, and the rewrites.",
               epilog=RUN_EXIT_CODES)
@advisor_options
def explain_command(**kw: Any) -> int:
    """Which lines break SCRIPT's graphs, why, and the rewrite (--try-fixes verifies config changes)."""
    return run_advisor("explain", "graph_breaks", lambda r: render_actions(action_items(r.session)),
                       lambda r: action_items(r.session), **kw)

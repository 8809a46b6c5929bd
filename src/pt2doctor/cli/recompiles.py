"""`pt2doctor recompiles SCRIPT`: per function, the chain of recompilations, their causes and fixes."""

from __future__ import annotations

from typing import Any

import click

from pt2doctor.analysis.recompiles import recompile_chains
from pt2doctor.cli.advisor import advisor_options, run_advisor
from pt2doctor.cli.options import RUN_EXIT_CODES, SCRIPT_COMMAND
from pt2doctor.report.advice import render_chains


@click.command("recompiles", context_settings=SCRIPT_COMMAND, short_help="Why SCRIPT recompiles, and what to change.",
               epilog=RUN_EXIT_CODES)
@advisor_options
def recompiles_command(**kw: Any) -> int:
    """Why does SCRIPT recompile, and what exactly to change (--try-fixes verifies the change)."""
    return run_advisor("recompiles", "recompiles", lambda r: render_chains(recompile_chains(r.session)),
                       lambda r: recompile_chains(r.session), **kw)

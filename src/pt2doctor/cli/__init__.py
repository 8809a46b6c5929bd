"""The `pt2doctor` command: parsing and dispatch only; one small module per subcommand.

Exit codes are `model.exit_codes.ExitCode`, documented in docs/reference/exit-codes.md. Usage errors exit 64
(not click's 2, which a script may well use itself); pt2doctor never ends in a traceback: an internal error is
reported in one line, with the run directory kept, and exits 70.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import NoReturn

import click

from pt2doctor.capture import bytecode_cache
from pt2doctor.model.exit_codes import ExitCode


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="pt2doctor")
def cli() -> None:
    """Diagnose torch.compile problems: graph breaks, recompiles, compile time, crashes."""


def _register() -> None:
    from pt2doctor.cli.accuracy import accuracy_command
    from pt2doctor.cli.compare import check_command, compare_command
    from pt2doctor.cli.demo import demo_command
    from pt2doctor.cli.diagnose import diagnose_command
    from pt2doctor.cli.explain import explain_command
    from pt2doctor.cli.recompiles import recompiles_command
    from pt2doctor.cli.report import report_command
    from pt2doctor.cli.run import run_command
    from pt2doctor.cli.versions import versions_command

    for command in (run_command, report_command, demo_command, recompiles_command, explain_command,
                    accuracy_command, diagnose_command, compare_command, check_command, versions_command):
        cli.add_command(command)
    try:
        from pt2doctor.cli.minify import minify_command
    except ImportError:
        return
    cli.add_command(minify_command)


def main(argv: list[str] | None = None) -> None:
    bytecode_cache.use_in_this_process()  # before anything imports torch
    _register()
    try:
        code = cli.main(args=argv, prog_name="pt2doctor", standalone_mode=False)
    except click.exceptions.Abort:
        code = ExitCode.INTERRUPTED
    except click.UsageError as exc:
        exc.show()
        code = ExitCode.USAGE
    except click.ClickException as exc:
        exc.show()
        code = exc.exit_code
    except KeyboardInterrupt:
        code = ExitCode.INTERRUPTED
    except SystemExit as exc:  # a command's own sys.exit(status)
        code = exc.code if isinstance(exc.code, int) else 1 if exc.code else 0
    except Exception as exc:  # the tool itself never dies with a traceback
        click.echo(f"pt2doctor: internal error: {type(exc).__name__}: {exc}", err=True)
        code = ExitCode.INTERNAL
    _exit(int(code) if isinstance(code, int) else ExitCode.OK)


def _exit(code: int) -> NoReturn:
    """Exit with `code`; with torch loaded and nothing else running, without the interpreter's teardown.

    Torch's interpreter teardown takes about a second (docs/design/minifier.md) and has nothing to do
    for pt2doctor: every file it wrote is closed and every
    child process it started has been waited for or killed by now. Another live (non-daemon) thread,
    a run still winding down, could still be writing, so then the ordinary exit joins it.
    """
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if "torch" in sys.modules and not others:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)

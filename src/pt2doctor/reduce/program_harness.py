"""The script that runs one candidate *program* (the user's source, reduced) the way `python SCRIPT` would.

Contract: `harness_text(run)` is a repro script in `processes.dispatch`'s sense: it defines `check()` and
`describe_failure(exc)`, so a warm worker (`processes.pool.WorkerPool`) runs it with `run_guarded`, and run
as `__main__` (`python harness.py`, `processes.fresh`) it prints `signature.FAILURE_MARKER` plus the same
description and exits 1 when the program fails. `check()`:
- sets torch's thread count to what a fresh interpreter has (`OMP_NUM_THREADS`, else the CPUs this
  process may run on): the warm worker runs single-threaded, and a kernel's numerics depend on it;
- changes to the script's directory, sets `sys.argv` to the script's argv and puts the directory first
  on `sys.path`, as `python SCRIPT ARGS` would;
- installs the run's `Overrides` (`capture.child.overrides`, the mechanism `diagnose`'s variants use: a
  backend forced onto every `torch.compile`, or `set_stance("force_eager")` for compilation off; and
  through `export.capture.observer` those that change torch.export's steps);
- runs the source as a fresh `__main__` module whose `__file__` is `run.file`, with the source in
  `linecache` under that name (tracebacks and `inspect` see the candidate, not the file on disk);
- turns `sys.exit(N)` with N != 0 into a failure described as `exit status N`, as a run's signature is, or where a
  compile failed before it (the program caught the compiler's exception and exited), as that compile's failure
  (`torch_compat.failed_compiles`; `analysis.failures.signature` reads the trace's first failure alike), but for
  a run whose exit is its verdict (`run.exit_status`: a regression test, whose runner exits 1 on a failed test).
`describe_failure` is the failure identity of `analysis.failures.failure_text` (the rule every run's
signature uses), or where `run.type_only` (a wrong result: the script's own check, whose message may
carry the values it compared) the type and a first line that names no values (`model.signature.
check_identity`), provided it was raised outside the compiler stack
(`analysis.failures.raised_inside_compiler`): an `AssertionError` from inside Inductor is a crash, another
failure, not the script's check.
"""

from __future__ import annotations

from dataclasses import dataclass

from pt2doctor.model.child import Overrides
from pt2doctor.model.serialize import dumps
from pt2doctor.model.signature import FAILURE_MARKER

_TEMPLATE = '''\
import linecache, os, sys, types

SOURCE = {source!r}
FILE = {file!r}
CWD = {cwd!r}
ARGV = {argv!r}
OVERRIDES = {overrides!r}
TYPE_ONLY = {type_only!r}
EXIT_STATUS = {exit_status!r}


class ProgramExit(Exception):
    """The program called sys.exit with a failing status."""


def check():
    from pt2doctor.capture import torch_compat
    from pt2doctor.capture.child.overrides import install
    from pt2doctor.model.child import Overrides
    from pt2doctor.model.serialize import loads

    import torch

    # the warm worker runs single-threaded (it forks); `python SCRIPT` would not, and a kernel's
    # reductions, hence a wrong result's size, depend on the thread count
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS") or 0) or len(os.sched_getaffinity(0)))
    os.chdir(CWD)
    sys.argv = list(ARGV)
    sys.path.insert(0, CWD)
    overrides = loads(OVERRIDES, Overrides)
    install(overrides)
    torch_compat.forget_compiles()
    if overrides.changes_export:
        from pt2doctor.export.capture import observer as export_observer

        export_observer.install(None, overrides)
    linecache.cache[FILE] = (len(SOURCE), None, SOURCE.splitlines(True), FILE)
    main = types.ModuleType("__main__")
    main.__file__ = FILE
    sys.modules["__main__"] = main
    try:
        exec(compile(SOURCE, FILE, "exec"), main.__dict__)
    except SystemExit as exit:
        if exit.code not in (0, None):
            raise ProgramExit(int(exit.code) if isinstance(exit.code, int) else 1) from None  # True: 1


def describe_failure(exc):
    from pt2doctor.analysis.failures import failure_text, raised_inside_compiler

    if isinstance(exc, ProgramExit):
        from pt2doctor.capture import torch_compat
        from pt2doctor.model.torch_text import compile_failure_line, is_limit_hit

        failed = [] if EXIT_STATUS else [(kind, reason) for kind, reason in torch_compat.failed_compiles()
                                         if not is_limit_hit(kind, reason)]
        if failed:  # it caught a compile's failure and exited: that failure is the run's, as a traced run's is
            return failure_text(failed[0][0], compile_failure_line(*failed[0]))
        return "exit status " + str(exc.args[0])
    import traceback

    text = failure_text(type(exc).__name__, str(exc))
    if TYPE_ONLY and not raised_inside_compiler("".join(traceback.format_tb(exc.__traceback__))):
        from pt2doctor.model.signature import check_identity

        return check_identity(text)
    return text


if __name__ == "__main__":
    try:
        check()
    except Exception as e:
        sys.stdout.flush()
        print("{marker}" + describe_failure(e), file=sys.stderr)
        sys.exit(1)
'''


@dataclass(frozen=True, slots=True)
class ProgramRun:
    """One way to run a candidate program: where, with which argv and overrides, judged how."""

    file: str  # the program's `__file__` (the script's path while reducing, repro.py when verifying)
    cwd: str
    argv: tuple[str, ...]
    overrides: Overrides = Overrides()
    type_only: bool = False
    exit_status: bool = False  # a failing exit is its status, a failed compile before it or not (a test runner's)


def harness_text(source: str, run: ProgramRun) -> str:
    return _TEMPLATE.format(source=source, file=run.file, cwd=run.cwd, argv=list(run.argv),
                            overrides=dumps(run.overrides).decode(), type_only=run.type_only,
                            exit_status=run.exit_status, marker=FAILURE_MARKER)

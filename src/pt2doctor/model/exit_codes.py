"""Every status a `pt2doctor` command exits with that is pt2doctor's own: the one table
(docs/reference/exit-codes.md says which command uses which, and why).

Contract: `ExitCode` is an `IntEnum`, so a member is the integer the process exits with. Where two commands
give one number different meanings, each meaning has its name (an alias of the same value), so the code
that exits says which it means: `ExitCode.FLAKY` in `diagnose`, `ExitCode.NOTHING_FAILED` in `minify`.
A command that runs a script otherwise mirrors the script's own status (`analysis.verdict.exit_code_of`:
its code, 128+N for signal N), which has no member here.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FOUND = 1  # diagnose: a compiler failure diagnosed (the bundle is written)
    MISMATCH = 1  # accuracy: a graph's results are wrong with nothing known to explain it
    DIFFERENT = 1  # compare: the runs differ; check: over budget, or new breaks/recompiles since the baseline
    UNVERIFIED = 1  # minify: a repro was written but could not be verified
    USER_ERROR = 2  # diagnose: the script itself is at fault (it fails with compilation off too)
    REPRO_PASSES = 2  # versions: the repro passes under the user's own torch (there is no failure to look for)
    FLAKY = 3  # diagnose: the runs of the unchanged script (or of repro.py) did not fail the same way
    # check, accuracy: the script itself failed (an exit status not 0, a signal) and nothing was judged wrong: a CI
    # job tells it from a budget overrun or wrong results (1); the script's own status is in --json and on line one
    SCRIPT_FAILED = 4
    NOTHING_FAILED = 3  # minify: nothing failed in the recording, or the graph does not fail alone
    # diagnose: not diagnosed, the GPU's memory was held by other processes in two runs (sysexits' EX_TEMPFAIL: the
    # machine's state; try again later)
    GPU_HELD = 75
    USAGE = 64  # a usage error, before any script runs (not click's 2, which a script may well use itself)
    DATA = 65  # an input that cannot be read: a damaged recording, or unreadable trace lines under --strict
    INTERNAL = 70  # an internal error of pt2doctor, reported in one line
    # the script (or job) was stopped at --timeout, as coreutils' `timeout` exits; diagnose: its --budget ran out
    # before the script's failure was reproduced
    TIMEOUT = 124
    INTERRUPTED = 130  # Ctrl-C, as a shell reports SIGINT (128 + 2)
    HUNG_UP = 129  # diagnose: stopped by SIGHUP (a closed terminal), 128 + 1; what was found is written
    TERMINATED = 143  # diagnose: stopped by SIGTERM (a job's limit, a scheduler), 128 + 15; what was found is written

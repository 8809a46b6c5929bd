"""pt2doctor's own environment variables (`PT2DOCTOR_*`), read in one place, when they are needed.

Contract: `settings(env=None) -> Settings` reads the variables from `env` (default: this process's
environment, as it is at the call, never at import: a test or a parent that sets one before starting
the work is heard) and returns them typed, with their defaults. docs/reference/environment.md lists
them (the `Read` table); a variable of torch's or the system's (`CUDA_VISIBLE_DEVICES`, `RANK`) is read
where it is used, as torch reads it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

RECORD_ACCURACY = "PT2DOCTOR_RECORD_ACCURACY"
MINIFY_SERVERS = "PT2DOCTOR_MINIFY_SERVERS"
SERVER_WARM_UP_TIMEOUT = "PT2DOCTOR_SERVER_WARM_UP_TIMEOUT"
MINIFY_DEBUG = "PT2DOCTOR_MINIFY_DEBUG"
STRICT = "PT2DOCTOR_STRICT"
WARM_UP_TIMEOUT_S = 600.0


@dataclass(frozen=True, slots=True)
class Settings:
    # `run --record` also judges each graph's first call against eager, with this tolerance
    record_accuracy: float | None = None
    # the minifier runs candidates in warm fresh interpreters even without a GPU (where forking misbehaves)
    minify_servers: bool = False
    # seconds a minifier server may take to warm up before it is given up on
    server_warm_up_timeout_s: float = WARM_UP_TIMEOUT_S
    # the minifier's workers keep their stdout and stderr
    minify_debug: bool = False
    # pt2doctor's own errors propagate instead of being kept (a step of diagnose that raises: `diagnose.step`)
    strict: bool = False


def default_jobs() -> int:
    """How many runs, queries and verifications go at once unless `--jobs` says otherwise, for every command and
    step: the CPUs this process may run on (its affinity, which a container's or a scheduler's CPU set limits; not
    the machine's count), at least one. The one definition of the default (issue #40)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


JOBS_DEFAULT_WORDS = "the CPUs this process may run on"  # how --help shows `default_jobs()`


def settings(env: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if env is None else env
    accuracy, warm_up = env.get(RECORD_ACCURACY), env.get(SERVER_WARM_UP_TIMEOUT)
    return Settings(
        record_accuracy=float(accuracy) if accuracy else None,
        minify_servers=env.get(MINIFY_SERVERS) == "1",
        server_warm_up_timeout_s=float(warm_up) if warm_up else WARM_UP_TIMEOUT_S,
        minify_debug=bool(env.get(MINIFY_DEBUG)),
        strict=bool(env.get(STRICT)),
    )

"""Virtual environments with other torch releases, made with pip and cached; the user's own never touched.

Contract:
- `list_releases(logs)` asks the user's pip (`python -m pip index versions torch`, else the version list
  of a `pip download` that cannot match) which torch versions its index and find-links offer;
  `ListingError` says why it could not.
- `ensure_env(cache, release, requirement, limits, reporter, logs)` returns the Python of an environment
  holding torch `release`: the cached one (`cache/py311/torch-2.14.1/`, complete only where its
  `pt2doctor-env.json` record was written after the install and the probe), else one made now: `python -m
  venv` from the user's interpreter, then that environment's own pip installs `requirement` (with the
  user's pip configuration: its files and `PIP_*` variables, the site file of the user's environment
  through `PIP_CONFIG_FILE`). pip's lines go to the reporter as it works. The install is stopped, and
  `OutOfBudget` raised, when the free disk under `cache` falls below `limits.min_free_bytes` or the
  search's deadline passes; pip failing (no such release for this Python, a constraint) raises
  `CannotRun` with pip's own words. A partial environment is removed. One process makes an environment at
  a time (a lock beside it). pip only ever runs in an environment under `cache`, never in `sys.prefix`.
- `given_env(path)` is the Python of a pre-made environment the user names (`--torch-env VERSION=PATH`);
  nothing is installed into it.
- `probe(python, logs, isolated)` imports torch in `python` and returns what it found (`TorchProbe`);
  `isolated_environ()` is the environment a release's interpreter runs with: without `PYTHONPATH`,
  `PYTHONHOME` and the user's site-packages, so its torch is the release's.
- `clear_cache(cache)` removes every cached environment and returns the bytes freed.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pt2doctor.capture import run_lock
from pt2doctor.capture.runner import Reporter
from pt2doctor.model.serialize import RecordError, convert, read_record, write_record
from pt2doctor.model.versions import TorchEnv, TorchProbe
from pt2doctor.processes.program_run import Finished, run_program, this_interpreter

ENV_RECORD = "pt2doctor-env.json"
_PROBE = ("import json, sys, torch; print(json.dumps({'version': torch.__version__, 'cuda': torch.version.cuda, "
          "'file': torch.__file__, 'prefix': sys.prefix}))")
_PROGRESS = re.compile(r"^(Collecting|Downloading|Processing|Installing collected|Successfully installed)")
_GB = 1024 ** 3
_EVERY_S = 15.0


class CannotRun(Exception):
    """This release cannot be run here (pip could not install it, its environment is broken)."""


class OutOfBudget(Exception):
    """The search must stop: its time ran out, or the disk is low."""


class ListingError(Exception):
    """pip could not say which torch versions exist."""


@dataclass(frozen=True, slots=True)
class Limits:
    deadline: float | None  # time.monotonic() at which the search stops; None: no budget
    min_free_bytes: int

    def check(self, cache: Path) -> str:
        """Why an install must stop now (the disk under `cache`, the time), or empty."""
        free = shutil.disk_usage(_existing(cache)).free
        if free < self.min_free_bytes:
            return (f"the free disk under {cache} is {free / _GB:.1f} GB, below the {self.min_free_bytes / _GB:.1f} GB "
                    "kept free (--min-free-gb)")
        return self.out_of_time()

    def out_of_time(self) -> str:
        """Why the search must stop now (its time ran out), or empty."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            return "the time budget ran out (--versions-budget)"
        return ""


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pt2doctor" / "torch-envs"


def isolated_environ() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONNOUSERSITE"] = "1"
    return env


def probe(python: str, logs: Path, isolated: bool = True) -> TorchProbe:
    import json

    ran = run_program((python, "-c", _PROBE), cwd=logs, logs=logs, timeout_s=600,
                      env=isolated_environ() if isolated else None)
    lines = ran.stdout.strip().splitlines()
    if ran.returncode != 0 or not lines:
        raise CannotRun(f"`import torch` fails in {python}: {_last_line(ran.stderr) or ran.stopped or 'no output'}")
    return convert(json.loads(lines[-1]), TorchProbe)


def list_releases(logs: Path) -> tuple[str, ...]:
    python = this_interpreter()
    ran = run_program((python, "-m", "pip", "index", "versions", "torch"), cwd=logs, logs=logs / "pip-index",
                      timeout_s=300)
    found = re.search(r"^Available versions:\s*(.+)$", ran.stdout, re.MULTILINE)
    if found is None:  # an older pip, or `pip index` refused: a requirement no version matches lists them all
        ran = run_program((python, "-m", "pip", "download", "--no-deps", "-d", str(logs / "none"), "torch==0.0.0.0"),
                          cwd=logs, logs=logs / "pip-download", timeout_s=300)
        found = re.search(r"\(from versions: ([^)]*)\)", ran.stderr)
    versions = tuple(v.strip() for v in found.group(1).split(",") if v.strip()) if found else ()
    if not versions:
        raise ListingError(f"pip lists no torch versions: {_last_line(ran.stderr) or ran.stopped or 'no output'} "
                           "(name the releases with --releases, or check your pip index)")
    return versions


def given_env(path: Path) -> str:
    """The Python of a pre-made environment (its directory, or its python itself)."""
    python = path if path.is_file() else path / "bin" / "python"
    if not python.exists():
        raise CannotRun(f"{path} is not a virtual environment (no {python})")
    return str(python)


def env_python(env: Path) -> str:
    return str(env / "bin" / "python")


def ensure_env(cache: Path, release: str, requirement: str, limits: Limits, reporter: Reporter,
               logs: Path) -> tuple[str, TorchEnv, bool]:
    """(its python, its record, whether it was made now); see the module docstring."""
    env = cache / f"py{sys.version_info[0]}{sys.version_info[1]}" / requirement.replace("==", "-")
    ready = _ready(env)
    if ready is not None:
        return env_python(env), ready, False
    try:
        with run_lock.claim(cache / ".locks" / env.name):
            return env_python(env), _make(env, release, requirement, limits, reporter, logs), True
    except run_lock.DirectoryBusy as exc:
        raise CannotRun(f"another pt2doctor is making its environment ({env})") from exc


def _ready(env: Path) -> TorchEnv | None:
    try:
        return read_record(env / ENV_RECORD, TorchEnv) if (env / ENV_RECORD).exists() else None
    except (RecordError, OSError):
        return None


def _make(env: Path, release: str, requirement: str, limits: Limits, reporter: Reporter, logs: Path) -> TorchEnv:
    stop = limits.check(env.parent)
    if stop:
        raise OutOfBudget(stop)
    started = time.monotonic()
    shutil.rmtree(env, ignore_errors=True)  # a partial one, left by an install that was stopped
    env.parent.mkdir(parents=True, exist_ok=True)
    try:
        _venv(env, logs)
        _refuse_user_prefix(env)
        reporter.status(f"torch {release}: pip install {requirement} into {env}")
        ran = run_program((env_python(env), "-m", "pip", "install", "--progress-bar", "off", "--no-input", requirement),
                          cwd=logs, logs=logs / "pip-install", env=_pip_environ(),
                          watch=_PipWatch(release, env.parent, limits, reporter))
        _pip_result(ran, requirement)
        found = probe(env_python(env), logs / "probe")
        if not Path(found.file).resolve().is_relative_to(env.resolve()):
            raise CannotRun(f"torch {release}'s environment imports torch from {found.file}, not from {env}")
    except BaseException:
        shutil.rmtree(env, ignore_errors=True)
        raise
    record = TorchEnv(release, requirement, found.version, found.cuda, sys.version.split()[0],
                      round(time.monotonic() - started, 1))
    write_record(env / ENV_RECORD, record)
    return record


def _venv(env: Path, logs: Path) -> None:
    ran = run_program((this_interpreter(), "-m", "venv", str(env)), cwd=logs, logs=logs / "venv", timeout_s=600)
    if ran.returncode != 0:
        raise CannotRun(f"python -m venv failed: {_last_line(ran.stderr) or ran.stopped}")


def _refuse_user_prefix(env: Path) -> None:
    """pip runs only in an environment made here: never in the interpreter pt2doctor runs in."""
    mine = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix)}
    if env.resolve() in mine or not (env / "pyvenv.cfg").exists():
        raise CannotRun(f"{env} is not an environment pt2doctor made: nothing is installed there")


def _pip_environ() -> dict[str, str]:
    """The user's environment for pip, with their environment's own pip.conf (pip reads `sys.prefix`'s, which
    in the new environment is another)."""
    env = isolated_environ()
    site = Path(sys.prefix) / "pip.conf"
    if site.exists() and "PIP_CONFIG_FILE" not in env:
        env["PIP_CONFIG_FILE"] = str(site)
    return env


class _PipWatch:
    """pip's progress lines to the reporter, and every `_EVERY_S` how much the disk filled since the install
    began (downloads and files written: pip prints no progress of its own when its output is a file); stops
    it when the disk or the budget runs low."""

    def __init__(self, release: str, where: Path, limits: Limits, reporter: Reporter) -> None:
        self.release, self.where, self.limits, self.reporter = release, where, limits, reporter
        self.seen = 0
        self.free_at_start = shutil.disk_usage(_existing(where)).free
        self.said = time.monotonic()

    def __call__(self, stdout: str) -> str:
        lines = stdout.splitlines()
        for line in lines[self.seen:]:
            if _PROGRESS.match(line.strip()):
                self.reporter.status(f"torch {self.release}: {_short(line.strip())}")
        self.seen = len(lines)
        if time.monotonic() - self.said > _EVERY_S:
            self.said = time.monotonic()
            written = max(0, self.free_at_start - shutil.disk_usage(_existing(self.where)).free)
            self.reporter.status(f"torch {self.release}: pip is working, {written / _GB:.1f} GB written so far")
        return self.limits.check(self.where)


def _pip_result(ran: Finished, requirement: str) -> None:
    if ran.stopped:
        raise OutOfBudget(f"the install of {requirement} was stopped: {ran.stopped}")
    if ran.returncode == 0:
        return
    errors = [line.strip() for line in ran.stderr.splitlines() if line.startswith("ERROR:")]
    # pip explains a conflict on stdout ("The user requested (constraint) torch<=2.14.1"), the error on stderr
    constraint = [line.strip() for line in (ran.stdout + ran.stderr).splitlines() if "(constraint)" in line]
    why = (errors[0] if errors else _last_line(ran.stderr)).split(" (from versions:")[0].removeprefix("ERROR: ")
    raise CannotRun(f"pip could not install {requirement}: {why}" + (f" ({constraint[0]})" if constraint else ""))


def clear_cache(cache: Path, on_each: Callable[[Path], None] | None = None) -> int:
    if not cache.exists():
        return 0
    freed = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file() and not p.is_symlink())
    for child in sorted(cache.iterdir()):
        if on_each is not None:
            on_each(child)
        shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink()
    return freed


def _existing(path: Path) -> Path:
    return next(p for p in (path, *path.parents) if p.exists())


def _short(line: str, width: int = 110) -> str:
    return line if len(line) <= width else line[:width - 3] + "..."


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""

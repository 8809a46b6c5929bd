"""What a search over torch releases may do, as one frozen value the CLI builds (`pt2doctor versions`,
`diagnose --versions`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pt2doctor.versions.torch_envs import default_cache_dir

DEFAULT_BUDGET_S = 3600.0  # installs and runs together: a CUDA build of torch takes minutes to install
DEFAULT_MIN_FREE_GB = 10.0  # an install stops before the disk under the cache has less than this free
DEFAULT_RUN_TIMEOUT_S = 600.0  # one run of the repro, a cold compile included


@dataclass(frozen=True, slots=True)
class VersionsSettings:
    releases: tuple[str, ...] = ()  # releases or ranges (`2.11.0..2.14.1`); empty: yours up to the newest
    cache_dir: Path = field(default_factory=default_cache_dir)
    budget_s: float | None = DEFAULT_BUDGET_S
    min_free_gb: float = DEFAULT_MIN_FREE_GB
    run_timeout_s: float = DEFAULT_RUN_TIMEOUT_S
    torch_envs: tuple[tuple[str, Path], ...] = ()  # pre-made environments by release (`--torch-env 2.14.1=PATH`)

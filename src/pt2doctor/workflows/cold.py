"""`pt2doctor run --cold`: measure compile time with every cache off against a warm cache.

Contract: `with_private_cache(options)` points the run at a cache folder inside its run directory
(`TORCHINDUCTOR_CACHE_DIR`, `TRITON_CACHE_DIR`), so "warm" means warmed by this tool's own run and
not by whatever the user's machine cached before. The normal run fills that cache; `measure` then
runs the script twice more: cold (`TORCHINDUCTOR_FORCE_DISABLE_CACHES=1`, as PyTorch's compile-time
guide does) in `<out>/cold`, and warm (the filled cache) in `<out>/warm`, and compares them.
"""

from __future__ import annotations

from dataclasses import replace

from pt2doctor.analysis.whatif_cold import ColdWarm, compare_cold_warm
from pt2doctor.capture.runner import Reporter, RunOptions, run_script
from pt2doctor.processes.launch import compile_caches_in


def with_private_cache(options: RunOptions) -> RunOptions:
    cache = (options.out_dir / "compile-cache").resolve()
    return replace(options, env={**options.env, **compile_caches_in(cache)})


def measure(options: RunOptions, reporter: Reporter | None = None) -> ColdWarm:
    if reporter is not None:
        reporter.status("cold run: every compile cache disabled")
    cold = run_script(replace(options, out_dir=options.out_dir / "cold",
                              env={**options.env, "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}), reporter)
    if reporter is not None:
        reporter.status("warm run: caches filled by the first run")
    warm = run_script(replace(options, out_dir=options.out_dir / "warm"), reporter)
    return compare_cold_warm(cold, warm)

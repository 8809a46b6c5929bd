"""Benchmark: `pt2doctor report` against `tlparse` on the same large trace, side by side, one run.

Usage: python bench/report.py TRACE_FILE_OR_DIR [--repeat N]
Measures wall time and peak RSS of each tool (child processes, `resource.getrusage`), alternating
runs, and prints a Markdown table with throughput ratios. Generate a trace with
`TORCH_TRACE=DIR python bench/make_large_trace.py [N]`.
"""
from __future__ import annotations

import argparse
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_PEAK = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
         "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def measure(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one run, measured in its own wrapper so peaks don't mix."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _PEAK, *cmd], capture_output=True, text=True)
    wall = time.perf_counter() - start
    code, peak_kb = proc.stdout.split()[-2:]
    if code != "0":
        raise SystemExit(f"{cmd[0]} failed: {proc.stderr[-500:]}")
    return wall, int(peak_kb) / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("trace", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    files = [args.trace] if args.trace.is_file() else sorted(args.trace.glob("*.log"))
    size_mb = sum(f.stat().st_size for f in files) / 1e6
    tlparse = shutil.which("tlparse")
    if tlparse is None:
        raise SystemExit("tlparse is not installed: pip install tlparse")
    ours_cmd = [sys.executable, "-m", "pt2doctor", "report", "--json", str(args.trace)]
    times: dict[str, list[float]] = {"pt2doctor": [], "tlparse": []}
    peaks: dict[str, float] = {"pt2doctor": 0.0, "tlparse": 0.0}
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as out:
            theirs_cmd = [tlparse, str(files[0]), "-o", out, "--overwrite", "--no-browser"]
            for name, cmd in (("pt2doctor", ours_cmd), ("tlparse", theirs_cmd)):
                wall, peak = measure(cmd)
                times[name].append(wall)
                peaks[name] = max(peaks[name], peak)
    ours, theirs = statistics.median(times["pt2doctor"]), statistics.median(times["tlparse"])
    print(f"machine: {platform.node()} {platform.machine()}, {platform.python_version()}, "
          f"date {time.strftime('%Y-%m-%d')}")
    print(f"trace: {size_mb:.1f} MB in {len(files)} file(s)\n")
    print("| tool | median wall (s) | MB/s | peak RSS (MB) |\n| --- | --- | --- | --- |")
    for name, wall in (("pt2doctor report", ours), ("tlparse", theirs)):
        key = "pt2doctor" if name.startswith("pt2") else "tlparse"
        print(f"| {name} | {wall:.2f} | {size_mb / wall:.1f} | {peaks[key]:.0f} |")
    print(f"\nthroughput ratio pt2doctor/tlparse: {theirs / ours:.2f}x (goal >= 2x)")


if __name__ == "__main__":
    main()

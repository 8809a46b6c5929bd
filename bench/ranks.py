"""Benchmark: `pt2doctor report` against `tlparse --all-ranks-html` on the traces of many ranks, one run.

Usage: python bench/ranks.py SOURCE_DIR [--ranks 16,32,64] [--repeat N] [--out FILE]
SOURCE_DIR holds the rank traces of a real job (`TORCH_TRACE=DIR torchrun --nproc-per-node 2 ...`). For
each rank count N, a job of N ranks is made from them: rank r is a copy of source rank r % S with its
rank number rewritten (file name and every line's `"rank"`), as a cluster job's directory looks when
every rank compiled the same program. Both tools read the same directory; wall time and peak RSS of
each (its process and the processes it waited for, `resource.getrusage`), alternating runs. pt2doctor
reads the ranks in parallel on every core; "MB/s" is the trace bytes over the median wall time, so a
tool that scales linearly keeps it flat as N grows.
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from report import measure  # noqa: E402  (bench/report.py: one run's wall time and peak RSS)

_RANK_FIELD = re.compile(rb'"rank": ?\d+')
_RANK_IN_NAME = re.compile(r"rank_\d+")


def make_job(sources: list[Path], ranks: int, into: Path) -> float:
    """`ranks` rank traces in `into` from the source ranks; returns their size in MB."""
    into.mkdir(parents=True)
    size = 0
    for r in range(ranks):
        source = sources[r % len(sources)]
        data = _RANK_FIELD.sub(f'"rank": {r}'.encode(), source.read_bytes())
        (into / _RANK_IN_NAME.sub(f"rank_{r}", source.name)).write_bytes(data)
        size += len(data)
    return size / 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("source", type=Path)
    parser.add_argument("--ranks", default="16,32,64")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    sources = sorted(p for p in args.source.glob("*.log") if _RANK_IN_NAME.search(p.name))
    tlparse = shutil.which("tlparse")
    if not sources or tlparse is None:
        raise SystemExit("need rank traces (*rank_N*.log) in SOURCE and tlparse installed (pip install tlparse)")
    rows = []
    for n in map(int, args.ranks.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            job = Path(tmp) / "job"
            size = make_job(sources, n, job)
            times: dict[str, list[float]] = {"pt2doctor": [], "tlparse": []}
            peaks = {"pt2doctor": 0.0, "tlparse": 0.0}
            for i in range(args.repeat):
                commands = {"pt2doctor": [sys.executable, "-m", "pt2doctor", "report", "--json", str(job)],
                            "tlparse": [tlparse, str(job), "--all-ranks-html", "-o", str(Path(tmp) / f"tl{i}"),
                                        "--overwrite", "--no-browser"]}
                for name, cmd in commands.items():
                    wall, peak = measure(cmd)
                    times[name].append(wall)
                    peaks[name] = max(peaks[name], peak)
            ours, theirs = statistics.median(times["pt2doctor"]), statistics.median(times["tlparse"])
            rows.append(f"| {n} | {size:.1f} | {ours:.2f} | {size / ours:.1f} | {peaks['pt2doctor']:.0f} | "
                        f"{theirs:.2f} | {size / theirs:.1f} | {peaks['tlparse']:.0f} | **{theirs / ours:.1f}x** |")
    load = os.getloadavg()[0]
    text = "\n".join([
        f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"date {time.strftime('%Y-%m-%d %H:%M')}, load {load:.1f}; "
        f"source: {len(sources)} rank trace(s) in {args.source}",
        "",
        "| ranks | MB | pt2doctor (s) | MB/s | peak RSS (MB) | tlparse --all-ranks-html (s) | MB/s | peak RSS (MB) | "
        "speed-up |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *rows, ""])
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()

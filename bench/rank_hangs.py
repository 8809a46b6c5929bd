"""Benchmark: how soon a hung job of two ranks is reported, with the first collective where its ranks part.

Usage: python bench/rank_hangs.py [--backend gloo|nccl] [--timeout S] [--pg-timeout S] [--out FILE]
Runs each hang of `tests/scripts/rank_jobs/` (the compiled branch with one all_reduce more on rank 1, the eager
loop with one all_reduce more on rank 0, the all_reduce of other sizes) under `pt2doctor run --nproc-per-node 2
--json`, once ended by pt2doctor's `--timeout` and once by the job's own collective timeout (`--pg-timeout`).
"hang start" is when the first rank issued its collective at the parting (the Flight Recorder's stamp); "to
report" is from then until pt2doctor printed the job (its exit); the timeout that ended the job is most of it.
On gloo each script gets `--linger` (a rank that is done stays alive, so the hang lasts until a timeout).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JOBS = Path(__file__).resolve().parents[1] / "tests" / "scripts" / "rank_jobs"
HANGS = ("compiled_branch.py", "eager_extra.py", "sizes_differ.py")


def run(script: str, backend: str, timeout: float, pg_timeout: float | None) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        # a rank that is done stays alive (gloo fails a peer's pending collective as soon as the other end exits)
        linger = ["--linger", str(timeout if pg_timeout is None else 6 * pg_timeout)] if backend == "gloo" else []
        args = ["--backend", backend, *(["--pg-timeout", str(pg_timeout)] if pg_timeout else []),
                *(["--compiler", "inductor"] if backend == "nccl" else []), *linger]
        cmd = [sys.executable, "-m", "pt2doctor", "run", "--json", "--timeout", str(timeout), "--nproc-per-node", "2",
               "--out", str(Path(tmp) / "job"), str(JOBS / script), *args]
        started = time.time()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        ended = time.time()
    doc = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    parting = doc.get("parting")
    calls = [r["call"] for r in parting["calls"] if r["call"]] if parting else []
    stamps = [c["issued_at"] for c in calls if c.get("issued_at")]
    hang = min(stamps) if stamps else None
    ended_by = "pt2doctor --timeout" if pg_timeout is None else f"the job's own ({pg_timeout:g} s)"
    named = (f"#{parting['seq']}: " + "; ".join(f"{r['label']} {r['call']['op'] if r['call'] else 'nothing'}"
                                               for r in parting["calls"])) if parting else (
        f"no record: {', '.join(doc['unrecorded'])}" if doc.get("unrecorded") else "not found (the records agree)")
    return (f"| {script} | {ended_by} | {proc.returncode} | {named} | {ended - started:.1f} | "
            f"{f'{ended - hang:.1f}' if hang else '-'} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="gloo", choices=("gloo", "nccl"))
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--pg-timeout", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rows = [run(script, args.backend, args.timeout, pg) for script in HANGS for pg in (None, args.pg_timeout)]
    text = "\n".join([
        f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"backend {args.backend}, date {time.strftime('%Y-%m-%d %H:%M')}, load {os.getloadavg()[0]:.1f}", "",
        "| job | ended by | exit | parting named | wall (s) | hang start to report (s) |",
        "| --- | --- | --- | --- | --- | --- |", *rows, ""])
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()

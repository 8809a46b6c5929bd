"""Benchmark: `pt2doctor run` vs plain `python` on a compiled GPT-2 (random weights, 2 layers) called
with several sequence lengths. Alternating runs, median ratio. Goal: <= 1.10x.

Usage: python bench/overhead.py [--repeat N] [--record]   (needs `transformers`)
`--record`: `pt2doctor run --record`, which also writes every graph for the minifier (and turns
AOTAutograd's cache off, so the after-AOT graphs are seen: recorded runs redo AOT on warm caches).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORKLOAD = '''
import torch
from transformers import GPT2Config, GPT2LMHeadModel
torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000)).eval()
compiled = torch.compile(model, backend="{backend}")
with torch.no_grad():
    for seq in (16, 24, 32, 48, 64):
        for _ in range(3):
            compiled(torch.randint(0, 1000, (2, seq)))
'''


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr.decode()[-1500:])
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pt2doctor-bench-"))
    script = work / "gpt2_workload.py"
    script.write_text(WORKLOAD.format(backend=args.backend))
    env = dict(os.environ)
    env.pop("TORCH_TRACE", None)
    plain_cmd = [sys.executable, str(script)]
    ours_cmd = [sys.executable, "-m", "pt2doctor", "run", "--json", "--out", str(work / "run"),
                *(["--record"] if args.record else []), str(script)]
    timed(plain_cmd, env)  # warm the Inductor/FX caches once, so both sides see the same cache state
    plain, ours = [], []
    for _ in range(args.repeat):
        plain.append(timed(plain_cmd, env))
        ours.append(timed(ours_cmd, env))
    ratios = [o / p for o, p in zip(ours, plain)]
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, date {time.strftime('%Y-%m-%d')}, backend {args.backend}"
          + (", recording" if args.record else ""))
    print("| run | python (s) | pt2doctor run (s) | ratio |\n| --- | --- | --- | --- |")
    for i, (p, o, r) in enumerate(zip(plain, ours, ratios), 1):
        print(f"| {i} | {p:.2f} | {o:.2f} | {r:.3f} |")
    print(f"\nmedian ratio: {statistics.median(ratios):.3f}x (goal <= 1.10x)")


if __name__ == "__main__":
    main()

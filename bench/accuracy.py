"""Benchmark: time to localize a wrong result, `pt2doctor accuracy` vs PyTorch's after-AOT accuracy minifier.

One user program per size: a chain of N pointwise ops, one op per source line, with a relu in the
middle, compiled with Inductor under `torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY =
"accuracy"` (the C++ relu returns x + 1). Same graph for both tools. Wall times, each from process
start to exit:
- torch: `TORCHDYNAMO_REPRO_AFTER=aot TORCHDYNAMO_REPRO_LEVEL=4 python user.py` (detects the
  mismatch, writes `minifier_launcher.py`), then `python minifier_launcher.py minify` (the default,
  isolated). Localized = the final minimal graph; "time to localize" is the sum of both commands.
- ours:  `pt2doctor accuracy --no-minify user.py` (run + per-graph check + one instrumented run:
  the first divergent node with its line), and `pt2doctor accuracy user.py` (the same plus the
  minified, verified repro).
Both tools run with Inductor's caches off (`TORCHINDUCTOR_FORCE_DISABLE_CACHES=1`): with warm caches
torch's after-AOT check never runs (an AOTAutograd cache hit skips the `compile_fx_inner` it wraps),
so the program exits 0 and no launcher is written, while ours still localizes (`--warm` measures
that). The machine may be shared: the 1-minute load average is written per row; compare ratios.
`torch-warm-minify` turns the caches off for torch's detecting run only and leaves its minify default.
Usage: python bench/accuracy.py [--sizes 100,20] [--tools ours,ours-minify,torch,torch-warm-minify] [--warm]
                                [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEADER = """import torch
import torch._inductor.config

torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"


def chain(x):
"""
FOOTER = """    return x


torch.manual_seed(0)
with torch.no_grad():
    print(torch.compile(chain)(torch.randn(16, 16)).sum().item())
"""


def program(n: int) -> tuple[str, int]:
    """The user program and the line of its relu."""
    body = []
    for i in range(n):
        body.append("    x = torch.relu(x)" if i == n // 2 else "    x = torch.sin(x)" if i % 2 else "    x = x * 1.01")
    relu_line = HEADER.count("\n") + 1 + n // 2
    return HEADER + "\n".join(body) + "\n" + FOOTER, relu_line


COLD = {"TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}


def timed(cmd: list[str], cwd: Path,
          env: dict[str, str] | None = None) -> tuple[float, subprocess.CompletedProcess[str]]:
    env = {**os.environ, **(env or {})}
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=3600)
    return time.monotonic() - started, proc


def run_torch(workdir: Path, env: dict[str, str], minify_env: dict[str, str]) -> dict:
    env = {**env, "TORCHDYNAMO_REPRO_AFTER": "aot", "TORCHDYNAMO_REPRO_LEVEL": "4"}
    detect_s, _ = timed([sys.executable, "user.py"], workdir, env)
    launchers = sorted(workdir.glob("torch_compile_debug/run_*/minifier/minifier_launcher.py"))
    if not launchers:
        return {"status": "no launcher written", "wall_s": detect_s}
    minify_s, proc = timed([sys.executable, launchers[-1].name, "minify"], launchers[-1].parent, minify_env)
    repro = launchers[-1].parent / "repro.py"
    ops = re.findall(r"torch\.ops\.(aten\.\w+\.\w+)\(", repro.read_text()) if repro.exists() else []
    return {"status": f"exit {proc.returncode}", "wall_s": detect_s + minify_s, "detect_s": detect_s,
            "minify_s": minify_s, "found": ", ".join(ops) or "-", "line": "no (aten graph only)"}


def run_ours(workdir: Path, relu_line: int, minify: bool, env: dict[str, str]) -> dict:
    cmd = [sys.executable, "-m", "pt2doctor", "accuracy", "--json", "--out", "run", "--jobs", str(os.cpu_count() or 1),
           *([] if minify else ["--no-minify"]), "user.py"]
    wall, proc = timed(cmd, workdir, env)
    try:
        (graph,) = json.loads(proc.stdout)["accuracy"]
    except (json.JSONDecodeError, KeyError, ValueError):
        return {"status": f"exit {proc.returncode}: {proc.stderr[-300:]}", "wall_s": wall}
    first = graph.get("first_divergent") or {}
    found = f"{first.get('op')} at line {first.get('line')}"
    row = {"status": "localized" if first.get("line") == relu_line else "WRONG", "wall_s": wall, "found": found,
           "line": "yes" if first.get("line") == relu_line else "no"}
    if minify and graph.get("minified"):
        m = graph["minified"]
        row["found"] += f"; repro {m.get('nodes_after')} node(s) {m.get('ops')}, verified={m.get('verified')}"
    return row


def machine() -> str:
    import torch

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return (f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores ({cpu}), "
            f"Python {platform.python_version()}, torch {torch.__version__}")


def write_table(rows: list[dict], out: Path) -> None:
    lines = ["# Accuracy localization benchmark: pt2doctor accuracy vs PyTorch's after-AOT accuracy minifier", "",
             f"Machine: {machine()}. Shared by three engineers at the time: see the load column.",
             "Command: `python bench/accuracy.py`. Program: a chain of N pointwise ops, one per line, with the",
             "relu in the middle under `cpp.inject_relu_bug_TESTING_ONLY = \"accuracy\"`; Inductor caches off",
             "(`TORCHINDUCTOR_FORCE_DISABLE_CACHES=1`) unless the tool is marked warm.", "",
             "| N ops | tool | wall (time to localize) | torch: detect + minify | found | user line | status "
             "| load 1 min |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        split = f"{r['detect_s']:.1f} s + {r['minify_s']:.1f} s" if "detect_s" in r else ""
        lines.append(f"| {r['n']} | {r['tool']} | {r['wall_s']:.1f} s | {split} | {r.get('found', '')} | "
                     f"{r.get('line', '')} | {r['status']} | {r['load']} |")
    lines += ["", *ratios(rows)]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")


def ratios(rows: list[dict]) -> list[str]:
    out = []
    for n in dict.fromkeys(r["n"] for r in rows):
        by_tool = {r["tool"]: r["wall_s"] for r in rows if r["n"] == n}
        for torch_tool in (t for t in by_tool if t.startswith("torch")):
            for tool in (t for t in by_tool if t.startswith("ours")):
                out.append(f"- N={n}: {torch_tool} / {tool} = {by_tool[torch_tool] / by_tool[tool]:.1f}x")
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100")
    parser.add_argument("--tools", default="ours,ours-minify,torch")
    parser.add_argument("--warm", action="store_true", help="Also run ours with warm caches (after one plain run).")
    parser.add_argument("--out", type=Path, default=Path(f"bench/results/accuracy-{datetime.date.today()}.md"))
    args = parser.parse_args()
    rows = []
    for n in map(int, args.sizes.split(",")):
        tools = [(t, COLD) for t in args.tools.split(",")] + ([("ours", {})] if args.warm else [])
        for tool, env in tools:
            with tempfile.TemporaryDirectory() as tmp:
                workdir = Path(tmp)
                text, relu_line = program(n)
                (workdir / "user.py").write_text(text)
                if not env:
                    subprocess.run([sys.executable, "user.py"], cwd=workdir, capture_output=True, timeout=1800)
                load = os.getloadavg()[0]
                if tool.startswith("torch"):  # torch-warm-minify: caches off to detect only, as they must be
                    result = run_torch(workdir, env, {} if tool == "torch-warm-minify" else env)
                else:
                    result = run_ours(workdir, relu_line, tool == "ours-minify", env)
            label = tool if env else f"{tool} (warm caches)"
            rows.append({"n": n, "tool": label, "load": f"{load:.1f}/{os.getloadavg()[0]:.1f}", **result})
            print(json.dumps(rows[-1]), flush=True)
            write_table(rows, args.out)  # after every row: a long run keeps what it has


if __name__ == "__main__":
    main()

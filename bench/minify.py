"""Benchmark: PyTorch's after-AOT minifier vs `pt2doctor minify`, on the same failing programs.

For each bug x model, one user program is written (the model compiled with Inductor and
`torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = BUG`; with `--device cuda` the model and
inputs are on the GPU and the bug is `...triton.inject_relu_bug_TESTING_ONLY`). Then:
- torch:    run it with TORCHDYNAMO_REPRO_AFTER=aot (REPRO_LEVEL 2 for compile errors, 4 for
            runtime/accuracy), then `python minifier_launcher.py minify` (isolated, the default)
            and `... minify --no-isolate`; wall time, queries ("Made N queries") and final nodes
            (the `minified_N_nodes` checkpoint).
            Final ops: the aten ops in the `repro.py` the launcher writes last.
- pt2doctor: record the program with the graph recorder, then `pt2doctor minify RUN_DIR`
            (verification in a fresh interpreter included in the time).
Like with like: each tool's wall time is its minify command alone, from process start to exit;
the run that records the failing graph (torch: the program under TORCHDYNAMO_REPRO_AFTER; ours:
under the graph recorder) is not counted for either, and is reported separately for ours.
The load average is written per row: the machine may be shared. "one query" (ours) is the wall time
of `python repro.py` on the final repro in a fresh interpreter: importing Inductor and compiling the
one failing op once, the work of a single isolated query of the smallest graph there is (torch's
isolated mode pays about this for every query), for reading the ratios.
Usage: python bench/minify.py [--models chain100,...] [--bugs compile_error,...] [--device cpu|cuda]
                              [--tools ours,torch,torch-no-isolate]  (`ours:N`: ours with --jobs N)
                              [--out bench/results/minify-DATE.md]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

MODELS = {
    "chain100": "chain(100)", "chain500": "chain(500)", "chain2000": "chain(2000)", "blocks16": "blocks(16)",
}
PROGRAM = """
import torch
import torch._inductor.config
torch._inductor.config.{backend}.inject_relu_bug_TESTING_ONLY = {bug!r}
DEVICE = {device!r}

def chain(n):
    def f(x):
        for i in range(n):
            x = torch.relu(x) if i == n // 2 else (torch.sin(x) if i % 2 else x * 1.01)
        return x
    return f, (torch.randn(16, 16, device=DEVICE),)

def blocks(n):
    layers = []
    for _ in range(n):
        layers += [torch.nn.Linear(32, 32), torch.nn.LayerNorm(32), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).eval().to(DEVICE)
    return model, (torch.randn(8, 32, device=DEVICE),)

fn, args = {model}
with torch.no_grad():
    torch.compile(fn, backend="inductor")(*args)
"""


def run_torch(workdir: Path, bug: str, isolate: bool) -> dict:
    env = {**os.environ, "TORCHDYNAMO_REPRO_AFTER": "aot",
           "TORCHDYNAMO_REPRO_LEVEL": "2" if bug == "compile_error" else "4"}
    subprocess.run([sys.executable, "user.py"], cwd=workdir, env=env, capture_output=True, timeout=1800)
    launchers = sorted(workdir.glob("torch_compile_debug/run_*/minifier/minifier_launcher.py"))
    if not launchers:
        return {"status": "no launcher"}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, launchers[-1].name, "minify", *([] if isolate else ["--no-isolate"])],
                          cwd=launchers[-1].parent, capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - started
    out = proc.stdout + proc.stderr
    queries = re.findall(r"Made (\d+) queries", out)
    ops = _final_ops(launchers[-1].parent / "repro.py")
    return {"status": f"exit {proc.returncode}", "wall_s": wall, "queries": int(queries[-1]) if queries else None,
            "nodes": len(ops) if ops is not None else None, "ops": ops or ""}


def _final_ops(repro: Path) -> list[str] | None:
    """The call ops of `forward` in the last checkpoint torch copied to `repro.py`."""
    if not repro.exists():
        return None
    text = repro.read_text()
    forward = text[text.find("def forward"):]
    forward = forward[:forward.find("\n\n")]
    return re.findall(r"torch\.ops\.(aten\.\w+\.\w+)\(", forward)


def run_ours(workdir: Path, bug: str, jobs: str = "") -> dict:
    started = time.monotonic()
    from pt2doctor.capture.child.graph_recorder import record_script

    record_script(workdir / "user.py", workdir / "run", timeout_s=1800)  # the child with the recorder on
    record_s = time.monotonic() - started
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pt2doctor", "minify", "run", "--json",
                           *(["--accuracy"] if bug == "accuracy" else []), *(["--jobs", jobs] if jobs else [])],
                          cwd=workdir, capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - started
    try:
        result = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"status": f"exit {proc.returncode}: {proc.stderr[-300:]}", "wall_s": wall}
    return {"status": "verified" if result["verified"] else "NOT verified", "wall_s": wall, "record_s": record_s,
            "queries": result["queries"], "nodes": result["nodes_after"], "ops": result["ops"],
            "reduce_s": result["time_s"], "floor_s": _one_query(Path(result["repro_path"]), workdir)}


def _one_query(repro: Path, workdir: Path) -> float:
    """Wall time of `python repro.py` (the final repro) in a fresh interpreter: one isolated query.

    A minifier that starts cold must import Inductor and compile at least one failing candidate
    before it knows anything; this run is that work done plainly (a minifier can only overlap or
    trim parts of it: the CPU probe, the interpreter's teardown), for reading the ratios."""
    started = time.monotonic()
    subprocess.run([sys.executable, repro.name], cwd=workdir / repro.parent, capture_output=True, timeout=600)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--bugs", default="compile_error,runtime_error,accuracy")
    parser.add_argument("--tools", default="ours,torch-no-isolate,torch")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--out", type=Path, default=Path(f"bench/results/minify-{datetime.date.today()}.md"))
    args = parser.parse_args()
    rows = []
    for bug in args.bugs.split(","):
        for model in args.models.split(","):
            for tool in args.tools.split(","):
                with tempfile.TemporaryDirectory() as tmp:
                    workdir = Path(tmp)
                    program = PROGRAM.format(bug=bug, model=MODELS[model], device=args.device,
                                             backend="triton" if args.device == "cuda" else "cpp")
                    (workdir / "user.py").write_text(textwrap.dedent(program))
                    load = os.getloadavg()[0]
                    result = (run_ours(workdir, bug, tool.partition(":")[2]) if tool.startswith("ours")
                              else run_torch(workdir, bug, tool == "torch"))
                rows.append({"model": model, "bug": bug, "tool": tool, "load": f"{load:.1f}/{os.getloadavg()[0]:.1f}",
                             **result})
                print(json.dumps(rows[-1]), flush=True)
                write_table(rows, args.out, args.device)  # after every row: a long run keeps what it has


def _machine(device: str) -> str:
    import platform

    import torch

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    gpu = f", GPU {torch.cuda.get_device_name()}" if device == "cuda" else ""
    return (f"{datetime.date.today()}, {platform.node()}: {os.cpu_count()} cores ({cpu}){gpu}, "
            f"Python {platform.python_version()}, torch {torch.__version__}")


def write_table(rows: list[dict], out: Path, device: str = "cpu") -> None:
    lines = [f"# Minifier benchmark ({device})", "", f"Machine: {_machine(device)}.", "",
             "| model | bug | tool | wall | record (ours) | one query (ours) | queries | final nodes | status "
             "| load 1 min (start/end) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        wall = f"{r['wall_s']:.1f} s" if "wall_s" in r else "-"
        record = f"{r['record_s']:.1f} s" if "record_s" in r else ""
        floor = f"{r['floor_s']:.1f} s" if "floor_s" in r else ""
        lines.append(f"| {r['model']} | {r['bug']} | {r['tool']} | {wall} | {record} | {floor} "
                     f"| {r.get('queries', '-')} | {r.get('nodes', '-')} {r.get('ops', '')} | {r['status']} "
                     f"| {r.get('load', '')} |")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

"""Benchmark: `pt2doctor diagnose` wall time / one plain failing run of the same script (issue 4, goal <= 4x).

Cases (each a user program that fails under `torch.compile` with Inductor):
- chain500: an elementwise chain of 500 ops with one relu, `cpp.inject_relu_bug_TESTING_ONLY =
  "compile_error"` (the minifier benchmark's chain);
- gpt2: a 2-layer Hugging Face GPT-2 built from a config (random weights, offline) with
  `activation_function="relu"`, same planted bug.
Per case, in one run: the plain program (`python prog.py`, the denominator), then `pt2doctor
diagnose`, and optionally (`--manual`) the guide's manual procedure with PyTorch's own tools: the
program under `eager`, `aot_eager`, `aot_eager_decomp_partition` and `inductor` (the program reads
`BACKEND` from the environment, as a user would edit it), then `TORCHDYNAMO_REPRO_AFTER=aot` and
`python minifier_launcher.py minify` (isolated, the default).
Writes a Markdown table with the machine, date and load to `--out`.
Usage: python bench/diagnose.py [--cases chain500,gpt2] [--manual] [--out bench/results/diagnose-DATE.md]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHAIN = """
import os
import torch
import torch._inductor.config
torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "compile_error"


def f(x):
    for i in range(500):
        x = torch.relu(x) if i == 250 else (torch.sin(x) if i % 2 else x * 1.01)
    return x


with torch.no_grad():
    torch.compile(f, backend=os.environ.get("BACKEND", "inductor"))(torch.randn(16, 16))
"""

GPT2 = """
import os
import torch
import torch._inductor.config
from transformers import GPT2Config, GPT2LMHeadModel
torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "compile_error"

torch.manual_seed(0)
config = GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=1000, n_positions=64, activation_function="relu")
model = GPT2LMHeadModel(config).eval()
ids = torch.randint(0, 1000, (2, 32))
with torch.no_grad():
    torch.compile(model, backend=os.environ.get("BACKEND", "inductor"))(ids)
"""

CASES = {"chain500": CHAIN, "gpt2": GPT2}


def timed(command: list[str], cwd: Path, env: dict[str, str] | None = None,
          timeout: float = 3600) -> tuple[float, int, str]:
    started = time.monotonic()
    proc = subprocess.run(command, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=timeout)
    return time.monotonic() - started, proc.returncode, proc.stdout + proc.stderr


def manual(workdir: Path, program: Path) -> dict:
    """The guide's procedure by hand: four backends, then torch's after-AOT minifier (isolated)."""
    total = 0.0
    for backend in ("eager", "aot_eager", "aot_eager_decomp_partition", "inductor"):
        wall, _, _ = timed([sys.executable, str(program)], workdir, {"BACKEND": backend})
        total += wall
    env = {"TORCHDYNAMO_REPRO_AFTER": "aot", "TORCHDYNAMO_REPRO_LEVEL": "2", "TORCH_COMPILE_DEBUG_DIR": str(workdir)}
    wall, _, _ = timed([sys.executable, str(program)], workdir, env)
    total += wall
    launchers = sorted(workdir.rglob("minifier_launcher.py"), key=lambda p: p.stat().st_mtime)
    if not launchers:
        return {"manual_s": round(total, 1), "manual_note": "no minifier_launcher.py written"}
    wall, code, _ = timed([sys.executable, str(launchers[-1]), "minify"], launchers[-1].parent)
    return {"manual_s": round(total + wall, 1), "manual_note": f"launcher exit {code}"}


def run_case(name: str, with_manual: bool) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix=f"pt2doctor-bench-diagnose-{name}-"))
    program = workdir / "prog.py"
    program.write_text(CASES[name])
    load = os.getloadavg()[0]
    plain, code, _ = timed([sys.executable, str(program)], workdir)
    assert code != 0, f"{name}: the plain run did not fail"
    wall, code, output = timed([sys.executable, "-m", "pt2doctor", "diagnose", "--out", str(workdir / "diag"),
                                str(program)], workdir)
    doc = json.loads((workdir / "diag" / "diagnosis.json").read_text())
    row = {
        "case": name, "plain_s": round(plain, 1), "diagnose_s": round(wall, 1), "ratio": round(wall / plain, 2),
        "exit": code, "category": doc["category"], "stage": doc["stage"], "culprit_ops": doc["culprit_ops"],
        "verified": doc["repro_verified"], "subsystem": doc["subsystem"], "steps": doc["timings"],
        "load": round(load, 2),
    }
    if with_manual:
        row.update(manual(workdir, program))
        row["manual_ratio"] = round(row["manual_s"] / plain, 2)
    return row


def write_table(rows: list[dict], out: Path) -> None:
    import torch

    lines = [
        f"# diagnose benchmark ({datetime.date.today()}, torch {torch.__version__}, {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()})",
        "",
        "Ratio = `pt2doctor diagnose` wall time / one plain failing run of the same program. Goal: <= 4x.",
        "Load = 1-minute load average when the case started (the machine may be shared).",
        "",
        "| case | plain run | diagnose | ratio | manual procedure (ratio) | category / stage | culprit | verified "
        "| subsystem | steps (s) | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        manual_cell = f"{r['manual_s']} s ({r['manual_ratio']}x)" if "manual_s" in r else "not run"
        steps = ", ".join(f"{k} {v:.1f}" for k, v in r["steps"].items())
        lines.append(
            f"| {r['case']} | {r['plain_s']} s | {r['diagnose_s']} s | **{r['ratio']}x** | {manual_cell} | "
            f"{r['category']} / {r['stage']} | {', '.join(r['culprit_ops'])} | {r['verified']} | {r['subsystem']} | "
            f"{steps} | {r['load']} |"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="chain500,gpt2")
    parser.add_argument("--manual", action="store_true", help="also time the manual procedure with torch's tools")
    parser.add_argument("--out", type=Path, default=Path(f"bench/results/diagnose-{datetime.date.today()}.md"))
    args = parser.parse_args()
    rows = []
    for name in args.cases.split(","):
        rows.append(run_case(name, args.manual))
        print(json.dumps(rows[-1]), flush=True)
        write_table(rows, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

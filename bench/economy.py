"""Benchmark: what a diagnosis costs against one plain failing run of the same program (issue 38).

Cases (`bench/programs/`, each a user program that fails under torch.compile):
- resnet: a ResNet-style CNN, three SGD steps on CPU, compiled with the user's own backend (Inductor's
  `compile_fx` behind an op check) that rejects `adaptive_avg_pool2d`;
- gpt2: three training steps of a 2-layer Hugging Face GPT-2 (random weights, offline) under Inductor with a
  wrong kernel (`cpp.inject_relu_bug_TESTING_ONLY = "accuracy"`), its loss checked against an eager copy;
- any script of the real-bug corpus, by name (`--cases resnet,float_floor_divide_off_by_one`).
Per case, in one run, with one cache directory for the case (`TORCHINDUCTOR_CACHE_DIR`, `TRITON_CACHE_DIR`):
1. a cold plain run (the cache directory fresh), 2. a warm plain run (the denominator: what the user sees
when they run it again), 3. `pt2doctor diagnose` once per source tree given with `--tree NAME=SRC` (its
`src/` on PYTHONPATH; the trees alternate in order from case to case), each finding the caches as the two plain
runs left them (a copy: a later tree's diagnosis does not find the graphs an earlier one compiled, which favoured
whichever tree went second by seconds up to tens of seconds, until session 27).
For each diagnosis: its wall time and ratios to the warm and the cold run; the time to the first verdict
(category and stage: the progress line `verdict: ...`, or an older tree's `failing stage: ...`); the
whole-program runs it made (diagnosis.json's `runs` ledger, or for an older tree its attempts plus the
program reducer's checks) and the graph-level runs; the verdict itself (category, stage, culprit, whether
repro.py verified, the workaround handed over), so a faster diagnosis can be seen to say the same.
Writes a Markdown table (machine, date, load) to `--out` after every case.
Usage: python bench/economy.py [--cases resnet,gpt2] [--tree base=/path/src --tree new=src] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROGRAMS = {"resnet": HERE / "programs" / "resnet_backend.py", "gpt2": HERE / "programs" / "gpt2_train.py"}
CORPUS = HERE.parent / "tests" / "realbugs"
_VERDICT = re.compile(r"pt2doctor \[\s*([\d.]+)s\] (?:verdict: |failing stage: )")


def program_of(case: str) -> Path:
    return PROGRAMS.get(case) or CORPUS / f"{case}.py"


def timed(command: list[str], cwd: Path, env: dict[str, str], timeout: float = 3600) -> tuple[float, int, str]:
    started = time.monotonic()
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return time.monotonic() - started, proc.returncode, proc.stdout + proc.stderr


def runs_of(doc: dict) -> tuple[int, int, str]:
    """(whole-program runs, graph-level runs, by step) from a diagnosis.json, the ledger where it has one."""
    ledger = doc.get("runs")
    if ledger:
        steps = ", ".join(f"{s['step']} {s['whole']}" for s in ledger["steps"] if s["whole"])
        return ledger["whole"], ledger["graph"], steps
    program = doc.get("program") or {}
    minify = doc.get("minify") or {}
    bisection = doc.get("bisection") or {}
    whole = len(doc["attempts"]) + (program.get("checks") or 0)
    graph = (minify.get("queries") or 0) + (bisection.get("queries") or 0)
    return whole, graph, f"attempts {len(doc['attempts'])}, program checks {program.get('checks') or 0}"


def handed_over(doc: dict) -> str:
    verified = [w for w in doc.get("workarounds") or () if w.get("verified")]
    return verified[-1].get("kind", "?") if verified else "-"


def diagnose(name: str, src: Path, program: Path, workdir: Path, env: dict[str, str]) -> dict:
    out = workdir / f"diag-{name}"
    wall, code, output = timed([sys.executable, "-m", "pt2doctor", "diagnose", "--out", str(out), str(program)],
                               workdir, {**env, "PYTHONPATH": str(src)})
    (workdir / f"diag-{name}.log").write_text(output)  # its progress lines, each with its second: the timeline
    verdict = _VERDICT.search(output)
    try:
        doc = json.loads((out / "diagnosis.json").read_text())
    except (OSError, ValueError):
        return {"tree": name, "diagnose_s": round(wall, 1), "exit": code, "error": output[-400:]}
    whole, graph, steps = runs_of(doc)
    return {"tree": name, "diagnose_s": round(wall, 1), "verdict_s": float(verdict.group(1)) if verdict else None,
            "exit": code, "category": doc["category"], "stage": doc["stage"],
            "culprit": ", ".join(doc["culprit_ops"][:3]), "verified": doc["repro_verified"],
            "workaround": handed_over(doc), "whole_runs": whole, "graph_runs": graph, "runs_by_step": steps,
            "steps": doc["timings"]}


def run_case(case: str, trees: list[tuple[str, Path]], flip: bool) -> list[dict]:
    program = program_of(case)
    workdir = Path(tempfile.mkdtemp(prefix=f"pt2doctor-bench-economy-{case}-"))
    caches = workdir / "caches"
    env = {**os.environ,
           "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
           "TRITON_CACHE_DIR": str(caches / "triton")}
    env.pop("PYTHONPATH", None)
    load = round(os.getloadavg()[0], 2)
    cold, code, _ = timed([sys.executable, str(program)], program.parent, env)
    warm, code, _ = timed([sys.executable, str(program)], program.parent, env)
    assert code != 0, f"{case}: the plain run did not fail"
    users = workdir / "caches-as-the-user-left-them"
    shutil.copytree(caches, users)
    rows = []
    for name, src in reversed(trees) if flip else trees:
        shutil.rmtree(caches)  # not the graphs an earlier tree's diagnosis compiled: the second would be favoured
        shutil.copytree(users, caches)
        row = {"case": case, "cold_s": round(cold, 1), "warm_s": round(warm, 1), "load": load,
               **diagnose(name, src, program, workdir, env)}
        row["ratio_warm"] = round(row["diagnose_s"] / warm, 2)
        row["ratio_cold"] = round(row["diagnose_s"] / cold, 2)
        if row.get("verdict_s") is not None:
            row["verdict_ratio"] = round(row["verdict_s"] / warm, 2)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def write_table(rows: list[dict], out: Path, command: str) -> None:
    import torch

    lines = [
        f"# diagnose's run economy ({datetime.date.today()}, torch {torch.__version__}, {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()})",
        "",
        f"Command: `{command}`. Ratio = diagnose wall time / one plain failing run (warm: its second run, torch's "
        "caches warm; cold: fresh cache directories). Verdict = seconds to the first verdict (category and stage) "
        "and its ratio to the warm run. Whole runs = whole-program runs (a program reducer's check counts as one); "
        "graph runs = graph-level runs (minifier, stage ladder, bisector queries). Load = 1-minute load average "
        "when the case started.",
        "",
        "| case | tree | plain warm / cold | diagnose | ratio warm (cold) | verdict | whole runs (by step) "
        "| graph runs | category / stage | culprit | verified | workaround | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['case']} | {r['tree']} | {r['warm_s']} / {r['cold_s']} s | {r['diagnose_s']} s "
                         f"| - | - | - | - | exit {r['exit']}: no diagnosis.json | - | - | - | {r['load']} |")
            continue
        verdict = f"{r['verdict_s']:.1f} s ({r['verdict_ratio']}x)" if r.get("verdict_s") is not None else "-"
        lines.append(
            f"| {r['case']} | {r['tree']} | {r['warm_s']} / {r['cold_s']} s | {r['diagnose_s']} s "
            f"| **{r['ratio_warm']}x** ({r['ratio_cold']}x) | {verdict} | {r['whole_runs']} ({r['runs_by_step']}) "
            f"| {r['graph_runs']} | {r['category']} / {r['stage']} | {r['culprit']} | {r['verified']} "
            f"| {r['workaround']} | {r['load']} |")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="resnet,gpt2")
    parser.add_argument("--tree", action="append", default=[],
                        help="NAME=SRC: a pt2doctor source tree to diagnose with (repeat; default: this one)")
    parser.add_argument("--out", type=Path, default=Path(f"bench/results/economy-{datetime.date.today()}.md"))
    args = parser.parse_args()
    trees = [(t.split("=", 1)[0], Path(t.split("=", 1)[1]).resolve()) for t in args.tree] or [
        ("this", HERE.parent / "src")]
    rows: list[dict] = []
    for i, case in enumerate(args.cases.split(",")):
        rows += run_case(case, trees, flip=bool(i % 2))
        write_table(rows, args.out, " ".join(["python", *sys.argv]))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

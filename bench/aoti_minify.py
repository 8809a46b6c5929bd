"""Benchmark: PyTorch's AOTInductor minifier vs pt2doctor's, on the same failing exported programs.

For each MLP depth x bug, one program is written: an MLP of `depth` Linear+ReLU layers (then a Linear and
a sigmoid) exported with `torch.export.export` and compiled with `aoti_compile_and_package` under
`torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = BUG`, the package loaded, called and checked
against eager. One run of it (not timed) prepares both minifiers' inputs:
- torch:     run under DUMP_AOTI_MINIFIER=1 (`aot_inductor.repro_level` 2, or 4 for `accuracy`, as
             torch's own minifier tests drive it, `torch/_dynamo/test_minifier_common.py`), it writes
             `minifier_launcher.py`; timed: `python minifier_launcher.py minify` (every query in that one
             process: the AOTI minifier has no isolated mode), then `python repro.py` on the repro it
             writes (the check torch's tests make); final nodes: the call nodes of the exported program
             that repro loads.
- pt2doctor: what the diagnose child keeps of the first `aoti_compile_and_package` (the exported program
             and config, the package's inputs: `export.capture.record.ExportRecorder`); timed:
             `reduce.aoti_minify.minify_program` in a fresh interpreter (warm forked workers, one per
             query, and the verification of repro.py in a fresh interpreter included).
The two run alternately, in turns (which one goes first alternates too). The load average is written
per row: the machine may be shared.
Usage: python bench/aoti_minify.py [--depths 1,3,6] [--bugs compile_error,accuracy] [--jobs 2] [--out FILE]
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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = '''
import sys
import torch
import torch._inductor.config
torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = {bug!r}
torch._inductor.config.aot_inductor.repro_level = {repro_level}
torch._dynamo.config.debug_dir_root = {debug!r}


class Mlp(torch.nn.Module):
    def __init__(self, depth):
        super().__init__()
        self.layers = torch.nn.Sequential(*[m for _ in range(depth)
                                            for m in (torch.nn.Linear(16, 16), torch.nn.ReLU())])
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.layers(x)).sigmoid()


torch.manual_seed(0)
model, x = Mlp({depth}), torch.randn(8, 16)
ep = torch.export.export(model, (x,))
if {keep!r}:  # what pt2doctor's diagnose child keeps of this run
    from pt2doctor.export.capture.record import ExportRecorder
    from pt2doctor.model.export import ExportStep

    recorder = ExportRecorder({keep!r})
    recorder.before(ExportStep.AOTI_COMPILE, (ep,), {{}})
    recorder.before(ExportStep.AOTI_RUN, (None, x), {{}})
path = torch._inductor.aoti_compile_and_package(ep)
package = torch._inductor.aoti_load_package(path)
torch.testing.assert_close(package(x), model(x))
'''

OURS = '''
import json, sys
from pathlib import Path
from pt2doctor.reduce.aoti_minify import minify_program
from pt2doctor.reduce.fx_minify import MinifyOptions
result = minify_program(Path(sys.argv[1]), MinifyOptions(Path(sys.argv[2]), jobs=int(sys.argv[3]), timeout_s=600),
                        accuracy=sys.argv[4] == "1").result
print(json.dumps({"nodes_before": result.nodes_before, "nodes_after": result.nodes_after, "ops": list(result.ops),
                  "queries": result.queries, "verified": result.verified}))
'''

COUNT = '''
import json, sys
import torch
ep = torch.export.load(sys.argv[1])
ops = [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]
print(json.dumps({"nodes_after": len(ops), "ops": ops}))
'''


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def _timed(args: list[str], cwd: Path,
           env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=env or _env(), timeout=3600)
    return proc, time.monotonic() - started


def prepare(work: Path, depth: int, bug: str) -> tuple[Path, Path | None]:
    """Run the failing program once: pt2doctor's kept directory, and torch's launcher (None: not written)."""
    debug, keep = work / "debug", work / "run"
    script = work / "program.py"
    script.write_text(PROGRAM.format(bug=bug, repro_level=4 if bug == "accuracy" else 2, debug=str(debug),
                                     depth=depth, keep=str(keep)))
    proc, _ = _timed([sys.executable, str(script)], work, {**_env(), "DUMP_AOTI_MINIFIER": "1"})
    launchers = sorted(debug.rglob("minifier_launcher.py"))
    if proc.returncode == 0:
        raise SystemExit(f"{script} did not fail")
    return keep / "export", launchers[-1] if launchers else None


def run_ours(kept: Path, work: Path, bug: str, jobs: int) -> dict[str, object]:
    out = work / "ours"
    proc, wall = _timed([sys.executable, "-c", OURS, str(kept), str(out), str(jobs), "1" if bug == "accuracy" else "0"],
                        work)
    row: dict[str, object] = {"tool": "pt2doctor", "wall": wall}
    if proc.returncode != 0:
        return {**row, "status": f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}"}
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return {**row, **result, "status": "verified" if result["verified"] else "NOT verified"}


def run_torch(launcher: Path | None) -> dict[str, object]:
    row: dict[str, object] = {"tool": "torch"}
    if launcher is None:
        return {**row, "status": "no minifier_launcher.py written", "wall": 0.0}
    (launcher.parent / "repro.py").unlink(missing_ok=True)  # only the launcher's own counts
    proc, wall = _timed([sys.executable, str(launcher), "minify"], launcher.parent)
    queries = len(re.findall(r"Writing checkpoint with", proc.stderr))
    row.update(wall=wall, checkpoints=queries, status=f"exit {proc.returncode}")
    repro = launcher.parent / "repro.py"
    if not repro.exists():
        return {**row, "status": f"exit {proc.returncode}, no repro.py"}
    check, row["verify_wall"] = _timed([sys.executable, str(repro)], launcher.parent)
    row["status"] = f"exit {proc.returncode}; repro.py exits {check.returncode}"
    loaded = re.search(r"torch\.export\.load\(\s*['\"](.*?)['\"]\s*\)", repro.read_text())
    if loaded:
        count, _ = _timed([sys.executable, "-c", COUNT, loaded.group(1)], launcher.parent)
        if count.returncode == 0:
            row.update(json.loads(count.stdout.strip().splitlines()[-1]))
    return row


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def bench(depths: list[int], bugs: list[str], jobs: int) -> list[dict[str, object]]:
    rows = []
    for turn, (depth, bug) in enumerate((d, b) for d in depths for b in bugs):
        work = Path(tempfile.mkdtemp(prefix=f"aoti-bench-{depth}-{bug}-"))
        kept, launcher = prepare(work, depth, bug)
        order = ("ours", "torch") if turn % 2 == 0 else ("torch", "ours")
        for tool in order:
            load = _load()
            row = run_ours(kept, work, bug, jobs) if tool == "ours" else run_torch(launcher)
            row.update(depth=depth, bug=bug, nodes_before=2 * depth + 2, load=f"{load}/{_load()}")
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def render(rows: list[dict[str, object]]) -> str:
    lines = ["| depth | nodes | bug | tool | wall | + repro.py run (torch) | queries | final nodes | status "
             "| load 1 min (start/end) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        queries = r.get("queries", f"{r['checkpoints']} checkpoints" if "checkpoints" in r else "")
        final = f"{r['nodes_after']} {r['ops']}" if "nodes_after" in r else "-"
        verify = f"{r['verify_wall']:.1f} s" if "verify_wall" in r else ""
        lines.append(f"| {r['depth']} | {r['nodes_before']} | {r['bug']} | {r['tool']} | {r['wall']:.1f} s | {verify} "
                     f"| {queries} | {final} | {r['status']} | {r['load']} |")
    lines.append("")
    for depth, bug in dict.fromkeys((r["depth"], r["bug"]) for r in rows):
        pair = {r["tool"]: r for r in rows if (r["depth"], r["bug"]) == (depth, bug)}
        ours, theirs = pair.get("pt2doctor"), pair.get("torch")
        if ours and theirs and ours["wall"] and theirs["wall"]:
            total = float(theirs["wall"]) + float(theirs.get("verify_wall", 0.0))  # type: ignore[arg-type]
            lines.append(f"- depth {depth}, {bug}: torch / pt2doctor wall = "
                         f"{float(theirs['wall']) / float(ours['wall']):.2f}x "  # type: ignore[arg-type]
                         f"(minify alone), {total / float(ours['wall']):.2f}x (with torch's repro.py run; "  # type: ignore[arg-type]
                         f"ours includes its verification)")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--depths", default="1,3,6")
    parser.add_argument("--bugs", default="compile_error,accuracy")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out")
    a = parser.parse_args()
    started = datetime.datetime.now()
    rows = bench([int(d) for d in a.depths.split(",")], a.bugs.split(","), a.jobs)
    table = render(rows)
    print(table)
    if a.out:
        Path(a.out).write_text(f"<!-- {started:%Y-%m-%d %H:%M} -->\n" + table)


if __name__ == "__main__":
    main()

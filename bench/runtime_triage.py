"""Benchmark: runtime triage (issue 31): does `diagnose` name the first bad kernel right, and how long does it take?

Cases (planted and real; CPU by default, `--cuda` for the Triton ones):
- nan_only_compiled: a float16 kernel that makes NaN only compiled (tests/diagnose/scripts);
- elu_subnormal_div_zero_nan: pytorch/pytorch#189801, NaN instead of -inf (tests/realbugs);
- jacfwd_trace_eye_segfault: pytorch/pytorch#190856, SIGSEGV in compiled code (tests/realbugs);
- tiled_reduction_tail_heap_overflow: pytorch/pytorch#196681, SIGABRT from glibc's heap checks (not every run);
- oom_uncompiled_nan_compiled: runs out of memory uncompiled, NaN compiled (tests/diagnose/scripts);
- with `--cuda`: nan_only_compiled on CUDA, gpu_index_out_of_range (a Triton device-side assert on an index out
  of range in eager too: a user error), searchsorted_slice_offset_device_assert (pytorch#186536: a fused kernel's
  own bounds check fails on an index it computes, eager's in range), gpu_illegal_address (the same index with
  Inductor's bounds check off: an illegal memory access, for compute-sanitizer to place; a user error too).
With `--cuda` a column says what compute-sanitizer found (memcheck, a run of its own): its kind of finding, the
kernel, and whether that is the kernel the checked run named.
"Named right": the fault's kind is the expected one and its ops include the expected ones.
Per case: `pt2doctor diagnose --no-bisect --no-workarounds --no-minify` (the triage does not depend on the
minifier), its total time, the triage step's time and budget, the kernel, kind, ops, the user's line; with
`--repro`, `--no-minify` is left out and the repro is reported too: verified, its form (the minimal graph's nodes,
else the reduced program's lines) and whether it holds the expected ops.
Writes a Markdown table to `--out`.
Usage: python bench/runtime_triage.py [--cuda] [--repro] [--only NAME] [--out bench/results/runtime-DATE.md]
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

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS, REALBUGS = ROOT / "tests" / "diagnose" / "scripts", ROOT / "tests" / "realbugs"
# name -> (script, args, cuda, expected kinds, ops the kernel must fuse)
CASES = {
    "nan_only_compiled": (SCRIPTS / "nan_only_compiled.py", (), False, ("nan_from_finite",), ("aten.sqrt.default",)),
    "elu_subnormal_div_zero_nan": (REALBUGS / "elu_subnormal_div_zero_nan.py", (), False, ("nan_from_finite",),
                                   ("aten.div.Tensor",)),
    "jacfwd_trace_eye_segfault": (REALBUGS / "jacfwd_trace_eye_segfault.py", (), False,
                                  ("bad_access", "out_of_bounds", "memory_corruption"), ()),
    "tiled_reduction_tail_heap_overflow": (REALBUGS / "tiled_reduction_tail_heap_overflow.py", (), False,
                                           ("memory_corruption",), ("aten.bmm.default",)),
    "oom_uncompiled_nan_compiled": (SCRIPTS / "oom_uncompiled_nan_compiled.py", (), False, ("nan_from_finite",),
                                    ("aten.sqrt.default",)),
    "nan_only_compiled_cuda": (SCRIPTS / "nan_only_compiled.py", ("cuda",), True, ("nan_from_finite",),
                               ("aten.sqrt.default",)),
    "gpu_index_out_of_range": (SCRIPTS / "gpu_index_out_of_range.py", (), True, ("out_of_bounds",),
                               ("aten.index.Tensor",)),
    "searchsorted_slice_offset_device_assert": (REALBUGS / "cuda" / "searchsorted_slice_offset_device_assert.py", (),
                                                True, ("out_of_bounds",), ("aten.searchsorted.Tensor",)),
    "gpu_illegal_address": (SCRIPTS / "gpu_illegal_address.py", (), True, ("out_of_bounds", "bad_access"),
                            ("aten.index.Tensor",)),
}


def run_case(name: str, work: Path, repro: bool = False) -> dict:
    script, args, _, kinds, ops = CASES[name]
    out = work / name
    started = time.monotonic()
    minify = () if repro else ("--no-minify",)
    proc = subprocess.run([sys.executable, "-m", "pt2doctor", "diagnose", "--no-bisect", "--no-workarounds",
                           *minify, "--out", str(out), str(script), *args], capture_output=True, text=True,
                          timeout=1800)
    wall = time.monotonic() - started
    path = out / "diagnosis.json"
    if not path.exists():
        return {"name": name, "wall": wall, "error": proc.stderr[-300:]}
    d = json.loads(path.read_text())
    runtime = d.get("runtime") or {}
    fault = runtime.get("fault") or {}
    right = fault.get("kind") in kinds and set(ops) <= set(fault.get("ops", ()))
    sources = "; ".join(dict.fromkeys(f"{Path(s['file']).name}:{s['line']}"
                                      for s in fault.get("sources", ()) if s.get("file")))
    return {"name": name, "wall": wall, "triage": d["timings"].get("runtime_triage"), "budget": runtime.get("budget_s"),
            "kernel": fault.get("kernel", "-"), "kind": fault.get("kind", "-"), "ops": ", ".join(fault.get("ops", ())),
            "sources": sources or "-", "right": right, "category": f"{d['category']} / {d['stage']}",
            "needs_compiler": bool(d.get("needs_compiler")), "repro": _repro(d, ops),
            "sanitizer": _sanitizer(runtime.get("sanitizer") or {}, fault.get("kernel"))}


def _sanitizer(found: dict, kernel: str | None) -> str:
    if not found:
        return "-"
    if found.get("said") != "access":
        return f"{found.get('said')}: {found.get('words', '')}"
    same = "the same kernel" if found.get("kernel") == kernel else "ANOTHER kernel"
    return (f"invalid {found.get('operation')} of {found.get('size')} bytes in `{found.get('kernel')}` ({same}), "
            f"{found.get('allocation') or 'allocation unknown'}")


def _repro(d: dict, ops: tuple[str, ...]) -> str:
    """repro.py as the diagnosis handed it over: verified or not, the minimal graph's nodes or the program's lines,
    and whether it holds the kernel's expected ops (a program's: its culprit calls)."""
    if not d.get("repro"):
        return "none"
    program = d.get("program") or {}
    form = (f"graph of {d['minified_nodes']} nodes" if d.get("minified_nodes") is not None else
            f"program {program.get('lines_before')} -> {program.get('lines_after')} lines")
    held = set(ops) <= set(d.get("culprit_ops") or ()) if d.get("minified_nodes") is not None else None
    return (f"{'verified' if d.get('repro_verified') else 'NOT verified'}, {form}"
            + ("" if held is None else f", {'holds' if held else 'lacks'} {', '.join(ops)}"))


def _row(r: dict, repro: bool, cuda: bool) -> str:
    if "error" in r:  # as many cells as the header has
        return (f"| {r['name']} | {r['wall']:.1f} s | - | - | no diagnosis.json: {r['error']!r} | | | | |"
                + " |" * (repro + cuda))
    return (f"| {r['name']} | {r['wall']:.1f} s | {r['triage'] or 0:.1f} s / {r['budget'] or 0:.0f} s | "
            f"`{r['kernel']}` | {r['kind']} | {r['ops']} | {r['sources']} | **{r['right']}** | {r['category']}"
            f"{' (needs the compiler)' if r['needs_compiler'] else ''} |" + (f" {r['repro']} |" if repro else "")
            + (f" {r['sanitizer']} |" if cuda else ""))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cuda", action="store_true", help="the CUDA cases only")
    parser.add_argument("--repro", action="store_true", help="minify too, and report the repro")
    parser.add_argument("--only", default="")
    parser.add_argument("--out", type=Path, default=None)
    a = parser.parse_args()
    names = [n for n, c in CASES.items() if c[2] == a.cuda and (not a.only or n in a.only.split(","))]
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        rows = [run_case(n, Path(tmp), a.repro) for n in names]
    head = (f"# runtime triage ({datetime.date.today()}, torch {torch.__version__}, {platform.machine()}, "
            f"{os.cpu_count()} cores, Python {platform.python_version()})\n\n"
            "| case | diagnose | triage / budget | first bad kernel | kind | fused ops | user's lines | named right | "
            "category / stage |" + (" repro.py |" if a.repro else "") + (" compute-sanitizer |" if a.cuda else "")
            + "\n|---|---|---|---|---|---|---|---|---|" + ("---|" if a.repro else "") + ("---|" if a.cuda else "")
            + "\n")
    text = head + "\n".join(_row(r, a.repro, a.cuda) for r in rows) + "\n"
    print(text)
    if a.out:
        a.out.write_text(text)


if __name__ == "__main__":
    main()

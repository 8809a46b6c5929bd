"""Benchmark: `pt2doctor versions` on the real-bug corpus: which bugs a newer torch release fixes, which
regressed, and what each release costs (its install once, then each repro run).

For each script in tests/realbugs/ (each fails on the torch it was checked on), one at a time:
    python -m pt2doctor versions --out OUT/NAME --versions-cache CACHE [--releases LIST] [--torch-env V=P]... SCRIPT
(the scripts are the repros: each exits non-zero while the bug is there). The per-bug outcomes are read
from OUT/NAME/versions.json; the Markdown table (machine, date, load; per bug the outcome under each
release, the run times, the conclusion; totals: fixed in which release, regressed, fails otherwise) is
printed and written to OUT/versions.md after every bug. Install times are those of the releases
installed during this run (an environment already in CACHE costs none: delete it, or use a fresh CACHE, to
measure its install).
Usage: python bench/versions.py [--only NAME[,NAME...]] [--out DIR] [--versions-cache DIR]
                                [--releases LIST] [--torch-env VERSION=PATH]... [--timeout S]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "realbugs"


def run_one(script: Path, out: Path, args: argparse.Namespace) -> tuple[dict | None, float, int]:
    command = [sys.executable, "-m", "pt2doctor", "versions", "--out", str(out),
               "--versions-cache", args.versions_cache, "--timeout", str(args.timeout)]
    if args.releases:
        command += ["--releases", args.releases]
    for env in args.torch_env:
        command += ["--torch-env", env]
    started = time.monotonic()
    with open(out.with_suffix(".log"), "w") as log:
        code = subprocess.run([*command, str(script)], stdout=log, stderr=subprocess.STDOUT).returncode
    path = out / "versions.json"
    return (json.loads(path.read_text()) if path.exists() else None), time.monotonic() - started, code


def row(name: str, doc: dict | None, wall: float, code: int, releases: list[str]) -> str:
    if doc is None:
        return f"| {name} | " + " | ".join("-" for _ in releases) + f" | pt2doctor exited {code} | {wall:.0f} |"
    runs = {r["release"]: r for r in doc["runs"]}
    cells = []
    for release in releases:
        r = runs.get(release)
        cells.append("-" if r is None else f"{_WORDS[r['outcome']]} ({r['run_s']:.1f} s)")
    return f"| {name} | " + " | ".join(cells) + f" | {_conclusion(doc)} | {wall:.0f} |"


_WORDS = {"fails_same": "fails same", "passes": "passes", "fails_other": "fails otherwise", "cannot_run": "cannot run"}


def _conclusion(doc: dict) -> str:
    if doc.get("fixed"):
        return f"fixed in {doc['fixed']['after']}"
    if doc.get("regressed"):
        return f"regressed in {doc['regressed']['after']}"
    if doc.get("stopped"):
        return doc["stopped"][:80]
    others = [r for r in doc["runs"] if r["outcome"] == "fails_other"]
    return "fails otherwise in " + ", ".join(r["release"] for r in others) if others else "not fixed"


def table(rows: list[str], docs: list[dict | None], releases: list[str], args: argparse.Namespace) -> str:
    fixed = [d for d in docs if d and d.get("fixed")]
    regressed = [d for d in docs if d and d.get("regressed")]
    other = [d for d in docs if d and not d.get("fixed") and any(r["outcome"] == "fails_other" for r in d["runs"])]
    installs = {r["release"]: r["install_s"] for d in docs if d for r in d["runs"] if r.get("install_s")}
    head = [
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{datetime.date.today()}; load {os.getloadavg()[0]:.1f} at the end",
        f"Command: python bench/versions.py --releases {args.releases or '(default)'} "
        + " ".join(f"--torch-env {e}" for e in args.torch_env),
        "",
        f"Bugs: {len(docs)}; fixed in a newer release: {len(fixed)}; regressed: {len(regressed)}; "
        f"fail otherwise in a newer release: {len(other)}",
        "Installs during this run: "
        + (", ".join(f"{k} {v:.0f} s" for k, v in installs.items()) or "none (all reused)"),
        "",
        "| bug | " + " | ".join(releases) + " | conclusion | wall s |",
        "|---|" + "---|" * (len(releases) + 2),
    ]
    return "\n".join(head + rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="")
    parser.add_argument("--out", default="pt2doctor-bench-versions")
    parser.add_argument("--versions-cache", default=str(Path.home() / ".cache" / "pt2doctor" / "torch-envs"))
    parser.add_argument("--releases", default="")
    parser.add_argument("--torch-env", action="append", default=[])
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    out = Path(args.out).absolute()
    out.mkdir(parents=True, exist_ok=True)
    names = [n for n in args.only.split(",") if n]
    scripts = [p for p in sorted(CORPUS.glob("*.py"))
               if not p.name.startswith(("test_", "_")) and (not names or p.stem in names)]
    rows: list[tuple[str, dict | None, float, int]] = []
    docs: list[dict | None] = []
    releases: list[str] = []
    for script in scripts:
        doc, wall, code = run_one(script, out / script.stem, args)
        docs.append(doc)
        for r in (doc or {}).get("runs", []):
            if r["release"] not in releases:
                releases.append(r["release"])
        releases.sort(key=lambda v: tuple(int(p) for p in v.split(".")))
        rows.append((script.stem, doc, wall, code))
        text = table([row(*r, releases) for r in rows], docs, releases, args)
        (out / "versions.md").write_text(text)
        print(f"{script.stem}: {_conclusion(doc) if doc else f'exit {code}'} ({wall:.0f} s)", flush=True)
    print(text)


if __name__ == "__main__":
    main()

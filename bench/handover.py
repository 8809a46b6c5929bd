"""Benchmark figures: what `pt2doctor diagnose` hands over, read from the bundles `bench/realbugs.py` wrote.

For each bug directory in OUT (one `diagnosis.json` each), the model owner's side: the narrowest verified
workaround (its kind and change), what it costs in steady state and in whole runs, the graphs it keeps
compiled, how many were tried; the maintainers' side: repro.py's lines (the short form in PyTorch's idiom,
else the harness or the reduced program), the harness form's lines, the regression test verified. Totals:
the bugs with a verified workaround (and with its steady-state cost measured), and over the graph repros of
at most 5 nodes, the largest and the median repro.py in lines. Nothing is run.
Usage: python bench/handover.py OUT [--md FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import msgspec

from pt2doctor.model.diagnosis import WORKAROUND_KINDS, Workaround, handed_over


def _lines(path: str | None) -> int | None:
    return len(Path(path).read_text().splitlines()) if path and Path(path).exists() else None


def _narrowest(workarounds: list[dict]) -> dict | None:
    """The workaround diagnose hands over first (`model.diagnosis.handed_over`), as diagnosis.json has it."""
    chosen = handed_over([msgspec.convert(w, Workaround) for w in workarounds])
    return next(w for w in workarounds if w["change"] == chosen.change) if chosen else None


def row(name: str, d: dict) -> dict:
    w = _narrowest(d.get("workarounds") or [])
    cost = (w or {}).get("cost") or {}
    short, minify, program = d.get("short"), d.get("minify") or {}, d.get("program")
    graph = d.get("minified_nodes") is not None
    return {
        "bug": name, "graph_nodes": d.get("minified_nodes") if graph else None,
        "repro_lines": _lines(d.get("repro")) if d.get("repro_verified") else None,
        "form": "short" if short else "program" if program and not graph else "harness" if d.get("repro") else "-",
        "harness_lines": _lines(minify.get("repro_path")) if graph else None,
        "test": bool(d["test"] if "test" in d else (short or {}).get("test") or (program or {}).get("test")),
        "workaround": w.get("change", "") if w else "", "kind": w.get("kind", "backend") if w else "",
        "steady_ms": None if cost.get("steady_s") is None else cost["steady_s"] * 1e3,
        "eager_steady_ms": None if cost.get("all_eager_steady_s") is None else cost["all_eager_steady_s"] * 1e3,
        "run_s": cost.get("seconds"), "eager_run_s": cost.get("all_eager_s"),
        "kept": (w or {}).get("graphs_kept_compiled"), "tried": len(d.get("workarounds") or []),
        "seconds": d.get("timings", {}).get("total"),
    }


def _fmt(value: object, spec: str = "") -> str:
    return "-" if value is None or value == "" else format(value, spec) if spec else str(value)


def render(rows: list[dict]) -> str:
    out = ["| bug | repro.py lines (form) | graph nodes | harness lines | test_repro.py "
           "| narrowest verified workaround | kind | steady state with it / all eager (ms) "
           "| whole runs with it / all eager (s) | graphs kept compiled | tried | diagnose s |", "|" + "---|" * 12]
    for r in rows:
        change = r["workaround"].split(":")[0][:90] if r["workaround"] else "none"
        out.append(f"| {r['bug']} | {_fmt(r['repro_lines'])} ({r['form']}) | {_fmt(r['graph_nodes'])} | "
                   f"{_fmt(r['harness_lines'])} | {'verified' if r['test'] else '-'} | {change} | {_fmt(r['kind'])} | "
                   f"{_fmt(r['steady_ms'], '.1f')} / {_fmt(r['eager_steady_ms'], '.1f')} | "
                   f"{_fmt(r['run_s'], '.1f')} / {_fmt(r['eager_run_s'], '.1f')} | {_fmt(r['kept'])} | {r['tried']} | "
                   f"{_fmt(r['seconds'], '.0f')} |")
    out += ["", *totals(rows)]
    return "\n".join(out) + "\n"


def totals(rows: list[dict]) -> list[str]:
    n = len(rows)
    verified = [r for r in rows if r["workaround"]]
    steady = [r for r in verified if r["steady_ms"] is not None]
    small = [r["repro_lines"] for r in rows if r["graph_nodes"] is not None and r["graph_nodes"] <= 5
             and r["repro_lines"] is not None]
    kinds = {k: sum(r["kind"] == k for r in verified) for k in WORKAROUND_KINDS}
    times = sorted(r["seconds"] for r in rows if r["seconds"] is not None)
    p90 = times[min(len(times) - 1, int(0.9 * len(times)))] if times else None
    return [
        f"- verified workaround: {len(verified)}/{n} ({100 * len(verified) // max(n, 1)}%); by kind: "
        + ", ".join(f"{k} {v}" for k, v in kinds.items()) + f"; steady-state cost measured on {len(steady)}",
        f"- graph repros of at most 5 nodes: {len(small)}; repro.py lines max {max(small) if small else '-'}, median "
        f"{statistics.median(small) if small else '-'}",
        f"- regression test verified: {sum(r['test'] for r in rows)}",
        f"- diagnose seconds: median {statistics.median(times) if times else '-'}, p90 {p90}, max "
        f"{times[-1] if times else '-'} (n={len(times)})",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--md", type=Path)
    args = parser.parse_args()
    rows = [row(d.parent.name, json.loads(d.read_text())) for d in sorted(args.out.glob("*/diagnosis.json"))]
    text = render(rows)
    print(text)
    if args.md:
        args.md.write_text(text)


if __name__ == "__main__":
    main()

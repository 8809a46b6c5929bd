"""Benchmark: `pt2doctor diagnose` on real torch.compile bugs reported to pytorch/pytorch.

Each script in tests/realbugs/ (see its README) still fails on the torch it was checked on and
starts with a header naming the issue and what a good diagnosis says: the failure `category`, the
first failing `stage` and the `culprit` op(s). For each script, one at a time, under compile caches of its own
(fresh `TORCHINDUCTOR_CACHE_DIR` and `TRITON_CACHE_DIR`, removed after):
    python SCRIPT                                     (the user's failing run: it fills the caches)
    python -m pt2doctor diagnose --out OUT/NAME SCRIPT
(each killed after `--timeout` seconds), so a diagnosis finds the caches as the user's run left them, whatever ran
before it on the machine (a cache shared by the whole corpus and by earlier runs made one bug 33 s or 147 s by
what it held); then OUT/NAME/diagnosis.json is compared with the header:
category right, stage right, culprit right (a header op appears in `culprit_ops` or in the user's calls
and source lines the minimal graph came from, `culprit_sources`, compared by op name:
`aten.bartlett_window` matches `bartlett_window.default`), and whether a verified repro was
written (with its node count). A run where pt2doctor exited 70 (its own internal error) is flagged.
The Markdown table (machine, date and load as in the other benchmarks, totals in percent) is
printed and written to OUT/realbugs.md after every bug, so a long run keeps what it has.
With --reuse, a bug whose diagnosis.json is already in OUT is not re-run (its exit code and total time
are read from it), e.g. to re-render the table after a header is corrected.
Usage: python bench/realbugs.py [--only NAME[,NAME...]] [--timeout S] [--out DIR] [--reuse] [--program-budget S]
"""

from __future__ import annotations

import argparse
import ast
import datetime
import json
import math
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import MISSING, dataclass, fields
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "realbugs"
INTERNAL_ERROR = 70
_OP = re.compile(r"\b(?:torch\.ops\.)?(?:aten|torch|higher_order)\.[A-Za-z_][\w.]*")
@dataclass(frozen=True)
class Header:
    """The docstring header of one corpus script (field names as written in the header)."""

    name: str
    issue: str
    title: str
    kind: str
    category: str
    stage: str
    culprit: str
    fails_on: str
    workaround: str = ""  # optional: the setting the issue's thread names (`torch._inductor.config.x = False (...)`)

    @property
    def setting(self) -> str:
        """The assignment the thread names, without the words after it."""
        return self.workaround.split(" (", 1)[0].strip()

    @property
    def culprit_ops(self) -> tuple[str, ...]:
        """The op names in `culprit` (aten or torch ops); a construct without one names none."""
        names = (_op_name(op) for op in _OP.findall(self.culprit))
        return tuple(name for name in names if "." not in name and not name.startswith("_"))


def parse_header(path: Path) -> Header:
    """The header of `path`: one `key: value` per line of its module docstring; every field is required."""
    doc = ast.get_docstring(ast.parse(path.read_text()), clean=True) or ""
    values = dict(line.split(":", 1) for line in doc.splitlines() if ":" in line)
    values = {key.strip(): value.strip() for key, value in values.items()}
    wanted = [f.name for f in fields(Header) if f.name != "name" and f.default is MISSING]
    missing = [key for key in wanted if not values.get(key)]
    if missing:
        raise ValueError(f"{path}: header lacks {', '.join(missing)}")
    return Header(name=path.stem, workaround=values.get("workaround", ""), **{key: values[key] for key in wanted})


def _op_name(op: str) -> str:
    """`aten.bartlett_window.default`, `aten.scatter.src`, `torch.ops.aten.relu`, `torch.relu`, `relu.default`,
    `torch.nn.functional.relu` -> the bare op name (an aten op's overload, whatever its name, is dropped)."""
    parts = re.sub(r"^(torch\.ops\.)?(aten|torch|higher_order)\.", "", op.strip()).split(".")
    return parts[0] if len(parts) <= 2 else parts[-1]


_DOTTED = re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|\b__\w+__\b")
_GENERIC = {"torch", "aten", "Tensor", "default", "nn", "functional", "ops"}
# An input property a failure depends on (diagnose's `input_needs`), as a header or a finding words it.
_INPUT_PROPERTIES = ("non-leaf", "requires_grad", "non-contiguous", "channels_last", "storage offset", "ZeroTensor")


def _names(text: str) -> set[str]:
    """The ops, Python constructs and input properties `text` names, by their last name: `aten.div.Tensor_mode`
    -> `div`, `list.append` -> `append`, `torch.compiler.nested_compile_region` -> `nested_compile_region`,
    `non-leaf input tensor` -> `non-leaf`."""
    names = set()
    for token in _DOTTED.findall(text):
        if re.match(r"(torch\.ops\.)?aten\.", token):
            names.add(_op_name(token))
        else:
            names.add(token.rsplit(".", 1)[-1])
    names |= {word for word in _INPUT_PROPERTIES if word in text}
    return names - _GENERIC


def culprit_right(header: Header, found: list[str]) -> bool:
    """A header op or construct is among what diagnose blamed: the minified graph's ops, or the calls left in
    the compiled code of a reduced program (`list.append` for a dropped side effect)."""
    wanted = set(header.culprit_ops) | _names(header.culprit)
    return bool(wanted & ({_op_name(op) for op in found} | set().union(*map(_names, found))))


@dataclass(frozen=True)
class Outcome:
    """What one diagnose run produced, compared with the header."""

    header: Header
    exit_code: int | None
    seconds: float
    diagnosis: dict | None
    note: str = ""
    plain_s: float | None = None  # the script's own failing run before it (None: reused, or not run)

    @property
    def category(self) -> str | None:
        return (self.diagnosis or {}).get("category")

    @property
    def stage(self) -> str | None:
        return (self.diagnosis or {}).get("stage")

    @property
    def culprits(self) -> list[str]:
        """The minimal graph's ops, and the user's calls and source lines its nodes came from (a decomposed
        graph's `sub, ge` came from `F.margin_ranking_loss`)."""
        d = self.diagnosis or {}
        sources = [text for o in d.get("culprit_sources") or []
                   for text in (o.get("call"), o.get("aten"), o.get("code")) if text]
        needs = [f"{n['property']} input" for n in d.get("input_needs") or []]
        return list(d.get("culprit_ops") or []) + sources + needs

    @property
    def verified(self) -> bool:
        return bool((self.diagnosis or {}).get("repro_verified"))

    @property
    def nodes(self) -> int | None:
        return (self.diagnosis or {}).get("minified_nodes")

    @property
    def size(self) -> str:
        """The repro's size: graph nodes (and the lines of repro.py in PyTorch's idiom, where it has that form),
        or the reduced program's lines (and its checks: the last that kept a smaller program, of all)."""
        d = self.diagnosis or {}
        program, short = d.get("program"), d.get("short")
        if self.nodes is None and program:
            checks = f", kept last at check {program['improved_at'][-1]} of {program['checks']}" if program.get(
                "improved_at") else ""
            return f"program {program['lines_before']} -> {program['lines_after']} lines{checks}"
        return f"{self.nodes}; repro.py {short['lines']} lines" if short else str(self.nodes)

    @property
    def handed_over(self) -> dict | None:
        """The workaround handed over, as diagnose picks it (`model.diagnosis.handed_over`: the narrowest verified)."""
        from pt2doctor.model.diagnosis import Workaround, handed_over
        from pt2doctor.model.serialize import loads

        raw = (self.diagnosis or {}).get("workarounds") or []
        typed = [loads(json.dumps(w), Workaround) for w in raw]
        chosen = handed_over(typed)
        return raw[typed.index(chosen)] if chosen is not None else None

    @property
    def workaround(self) -> str:
        """The kind of the workaround handed over, the setting for a `config` one; `setting found` where the header
        names the thread's setting and the hand-over is that setting."""
        w = self.handed_over
        if w is None:
            return "-"
        if w.get("kind") != "config":
            return w.get("kind") or "?"
        line = next((x.strip()[1:].strip() for x in (w.get("patch") or "").splitlines()
                     if x.startswith("+") and "config." in x and "=" in x), "")
        found = " (the thread's)" if self.header.setting and self.header.setting == line else ""
        return f"config: {line or w['change'][:60]}{found}"

    @property
    def repro_lines(self) -> int | None:
        """repro.py's lines, its docstring included: what the reader of the issue sees (issue 39: at most 40)."""
        path = (self.diagnosis or {}).get("repro")
        try:
            return len(Path(path).read_text().splitlines()) if path else None
        except OSError:
            return None

    @property
    def where_to_look(self) -> int:
        return len((self.diagnosis or {}).get("where_to_look") or [])

    def right(self) -> dict[str, bool]:
        return {"category": self.category == self.header.category, "stage": self.stage == self.header.stage,
                "culprit": culprit_right(self.header, self.culprits), "verified": self.verified,
                "verified_culprit": self.verified and culprit_right(self.header, self.culprits)}


def reused(path: Path, out: Path) -> Outcome | None:
    """The outcome of an earlier run in OUT (its diagnosis.json), compared with the header as it is now."""
    result = out / path.stem / "diagnosis.json"
    if not result.exists():
        return None
    diagnosis = json.loads(result.read_text())
    return Outcome(parse_header(path), diagnosis.get("exit_code"), (diagnosis.get("timings") or {}).get("total", 0.0),
                   diagnosis)


def diagnose(path: Path, out: Path, timeout: float, options: tuple[str, ...] = ()) -> Outcome:
    """The script's plain run, then `pt2doctor diagnose` on it, each in its own process group (killed whole at the
    timeout), under compile caches of their own (see the module docstring)."""
    from pt2doctor.processes.launch import compile_caches_in

    header = parse_header(path)
    run_dir, caches = out / header.name, out / "caches" / header.name
    shutil.rmtree(caches, ignore_errors=True)
    env = {**os.environ, **compile_caches_in(caches)}
    try:
        with open(out / f"{header.name}.log", "w") as log:
            plain_s, _ = _timed([sys.executable, str(path)], log, env, timeout)
            log.write(f"\n--- the script's plain run: {plain_s:.1f} s; pt2doctor diagnose:\n")
            log.flush()
            seconds, code = _timed([sys.executable, "-m", "pt2doctor", "diagnose", "--out", str(run_dir), *options,
                                    str(path)], log, env, timeout)
    finally:
        shutil.rmtree(caches, ignore_errors=True)
    note = f"killed at {timeout:.0f} s" if code is None else ""
    result = run_dir / "diagnosis.json"
    diagnosis = json.loads(result.read_text()) if result.exists() else None
    if code == INTERNAL_ERROR:
        note = "pt2doctor internal error (exit 70)"
    return Outcome(header, code, seconds, diagnosis, note, plain_s)


def _timed(command: list[str], log, env: dict[str, str], timeout: float) -> tuple[float, int | None]:
    """Seconds and exit code (None: killed at `timeout`, with its process group)."""
    started = time.monotonic()
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        code = None
    return time.monotonic() - started, code


def _mark(ok: bool, got: object) -> str:
    return "yes" if ok else f"no ({got})"


def row(o: Outcome) -> str:
    right = o.right()
    culprit = "yes" if right["culprit"] else f"no ({', '.join(o.culprits) or '-'})"
    repro = f"yes ({o.size})" if o.verified else ("no" if o.diagnosis else "-")
    code = "-" if o.exit_code is None else str(o.exit_code)
    flag = f" **{o.note}**" if o.note else ""
    return (f"| {o.header.name} | {o.header.kind} | {_mark(right['category'], o.category)} | "
            f"{_mark(right['stage'], o.stage)} | {culprit} | {repro} | {o.repro_lines or '-'} | {o.where_to_look} | "
            f"{o.workaround} | {code}{flag} | {o.seconds:.0f} | {'-' if o.plain_s is None else f'{o.plain_s:.0f}'} |")


def totals(outcomes: list[Outcome]) -> list[str]:
    n = len(outcomes)
    if not n:
        return []
    counts = {key: sum(o.right()[key] for o in outcomes) for key in outcomes[0].right()}
    pct = {key: f"{count}/{n} ({100 * count / n:.0f}%)" for key, count in counts.items()}
    internal = sum(o.exit_code == INTERNAL_ERROR for o in outcomes)
    kinds: dict[str, int] = {}
    for o in outcomes:
        kind = o.workaround.split(":", 1)[0]
        kinds[kind] = kinds.get(kind, 0) + 1
    said = ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items(), key=lambda kv: -kv[1]))
    short = sum(o.repro_lines is not None and o.repro_lines <= 40 for o in outcomes)
    looked = sum(o.where_to_look > 0 for o in outcomes)
    seconds = sorted(o.seconds for o in outcomes)
    return [f"| **total** | {n} | {pct['category']} | {pct['stage']} | {pct['culprit']} | {pct['verified']} | "
            f"{short}/{n} at most 40 | {looked}/{n} non-empty | {said} | {internal} internal errors | "
            f"{sum(seconds):.0f} | {sum(o.plain_s or 0 for o in outcomes):.0f} |",
            "", f"Verified repro that names the culprit: {pct['verified_culprit']}.",
            f"Seconds a bug: median {statistics.median(seconds):.0f}, "
            f"p90 {seconds[math.ceil(0.9 * n) - 1]:.0f} (nearest rank)."]


def _machine() -> str:
    import torch

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return (f"{datetime.date.today()}, {platform.node()}: {os.cpu_count()} cores ({cpu}), "
            f"Python {platform.python_version()}, torch {torch.__version__}")


def table(outcomes: list[Outcome], machine: str, load: str) -> str:
    lines = ["# Real-bug benchmark: `pt2doctor diagnose` on tests/realbugs", "",
             f"Machine: {machine}. Load average (1 min) at start/end: {load}.", "",
             "| bug | kind | category right | stage right | culprit right | verified minimal repro (nodes) "
             "| repro.py lines | where to look | workaround handed over | exit code | seconds | plain run (s) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    return "\n".join([*lines, *map(row, outcomes), *totals(outcomes)]) + "\n"


def corpus(only: str, folder: Path = CORPUS) -> list[Path]:
    scripts = sorted(p for p in folder.glob("*.py") if not p.name.startswith(("test_", "_")))
    names = set(filter(None, only.split(",")))
    unknown = names - {p.stem for p in scripts}
    if unknown:
        raise SystemExit(f"no such bug in {folder}: {', '.join(sorted(unknown))}")
    return [p for p in scripts if not names or p.stem in names]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated script names (without .py)")
    parser.add_argument("--corpus", type=Path, default=CORPUS,
                        help="folder of bug scripts (default tests/realbugs; tests/realbugs/cuda needs a GPU)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per bug (default 600)")
    parser.add_argument("--out", type=Path, default=Path(f"/tmp/realbugs-{datetime.date.today()}"))
    parser.add_argument("--reuse", action="store_true", help="do not re-run a bug that has a diagnosis.json in --out")
    parser.add_argument("--program-budget", type=float, default=None,
                        help="diagnose's --program-budget (seconds of program reduction; default: diagnose's)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    machine, start_load, outcomes = _machine(), os.getloadavg()[0], []
    for path in corpus(args.only, args.corpus):
        options = ("--program-budget", str(args.program_budget)) if args.program_budget else ()
        outcomes.append((args.reuse and reused(path, args.out)) or diagnose(path, args.out, args.timeout, options))
        print(row(outcomes[-1]), flush=True)
        load = f"{start_load:.1f}/{os.getloadavg()[0]:.1f}"
        (args.out / "realbugs.md").write_text(table(outcomes, machine, load))
    print(table(outcomes, machine, f"{start_load:.1f}/{os.getloadavg()[0]:.1f}"))


if __name__ == "__main__":
    main()

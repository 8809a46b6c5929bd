"""The HTML page as data: `page_data(report, inputs)` -> plain dicts the template draws.

Contract: pure (no I/O; `capture.report_inputs` did that). Every string here is raw user data and stays raw:
escaping is the template's job (Jinja2 autoescape) and the JSON embedder's (`html.embed_json`).
Sections the session has nothing for are empty, and the template skips them. The results of later
stages are read from `session.extras` (`diagnosis`, `minify`, `advisor`) by shape, not by schema:
scalars become a key/value table, lists of dicts a table, multi-line strings a code block, so those
sections light up when the stages start writing them.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from pathlib import Path
from typing import Any

from pt2doctor.model import Compile, RecompileChain, Session
from pt2doctor.model.report_inputs import ArtifactText, HtmlInputs, Snippet
from pt2doctor.model.serialize import to_builtins
from pt2doctor.report.document import Report
from pt2doctor.report.html_charts import PHASES, anchor, breakdown, timeline

LEAD_SECTION = "extra-diagnosis"
EXTRA_SECTIONS: dict[str, str] = {"diagnosis": "Diagnosis", "minify": "Minified repro", "advisor": "Advisor"}
_FWD_BWD = frozenset({"inductor_post_grad_graph", "inductor_output_code"})


def page_data(report: Report, inputs: HtmlInputs) -> dict[str, Any]:
    s = report.session
    payloads: list[dict[str, Any]] = []
    return {
        "title": _title(s),
        "verdict": {"ok": report.verdict.ok, "headline": report.verdict.headline,
                    "category": report.verdict.category.value if report.verdict.category else None},
        "actions": _actions(report),
        "stats": _stats(s),
        "failures": [_failure(f, inputs) for f in s.failures],
        "timeline": timeline(_timeline_groups(s, inputs), run_start=s.started_at, run_wall=s.wall_s),
        "breakdown": breakdown(s.compiles),
        "phase_totals": _phase_totals(report.analysis.phase_totals),
        "breaks": [_break(i, b, inputs) for i, b in enumerate(s.graph_breaks, 1)],
        "recompiles": [_recompiles(chain) for chain in report.recompiles],
        "compiles": [_compile(c, inputs, payloads) for c in sorted(s.compiles, key=lambda c: c.compile_id)],
        "ranks": _ranks(inputs),
        # a diagnosis is what the page is about: it leads; the other stages' sections follow the run's
        "lead": next((x for x in _extras(s) if x["id"] == LEAD_SECTION), None),
        "extras": [x for x in _extras(s) if x["id"] != LEAD_SECTION],
        "provenance": _provenance(s),
        "config_diff": sorted(s.environment.config_diff.items()),
        "notes": _notes(s, inputs),
        "payloads": payloads,
    }


def _title(s: Session) -> str:
    script = next((a for a in s.command if a.endswith(".py")), s.command[0] if s.command else "")
    return Path(script).name if script else (s.run_dir or "trace")


def _actions(report: Report) -> list[dict[str, Any]]:
    out = []
    for explained in report.failures[:1]:
        failure = explained.failure
        title = f"{failure.category.value.replace('_', ' ')}: {failure.exception.rsplit('.', 1)[-1]}"
        out.append({"severity": "error", "title": title, "fix": f"root cause: {explained.root}",
                    "where": f"{failure.file}:{failure.line}" if failure.file else None, "anchor": "failures"})
    for f in report.analysis.actions:
        where = str(f.where) if f.where and str(f.where) not in f.title else None
        out.append({"severity": f.severity.value, "title": f.title,
                    "fix": f.fix[0].removeprefix("pt2doctor: ") if f.fix else "", "where": where,
                    "anchor": _ANCHORS.get(f.kind, "timeline")})
    return out


_ANCHORS = {"graph_break": "breaks", "recompile": "recompiles"}


def _stats(s: Session) -> list[tuple[str, str]]:
    return [("frames", str(s.frames)), ("graphs", str(s.graphs)), ("ops", str(s.ops)),
            ("graph breaks", str(s.graph_break_count)), ("recompiles", str(len(s.recompiles))),
            ("compile time", f"{s.compile_time_s:.2f} s"),
            ("wall time", f"{s.wall_s:.1f} s" if s.wall_s is not None else "n/a")]


def _snippet(snippet: Snippet | None) -> dict[str, Any] | None:
    if snippet is None:
        return None
    return {"file": snippet.file,
            "lines": [{"no": snippet.first + i, "text": text, "hit": snippet.first + i == snippet.line}
                      for i, text in enumerate(snippet.lines)]}


def _failure(f: Any, inputs: HtmlInputs) -> dict[str, Any]:
    return {"category": f.category.value, "exception": f.exception, "message": f.message.strip(),
            "where": f"{f.file}:{f.line}" if f.file else None, "cid": str(f.compile_id) if f.compile_id else None,
            "anchor": anchor(str(f.compile_id)) if f.compile_id else None, "chain": list(f.chain[1:]),
            "traceback": f.traceback, "origin": f.origin,
            "snippet": _snippet(inputs.snippets.get((f.file, f.line))) if f.file and f.line else None}


def _timeline_groups(s: Session, inputs: HtmlInputs) -> list[tuple[str, tuple[Compile, ...]]]:
    if inputs.rank_compiles:
        return [(f"rank {r}", cs) for r, cs in inputs.rank_compiles.items()]
    return [("", s.compiles)]


def _phase_totals(totals: dict[str, float]) -> list[dict[str, Any]]:
    whole = sum(totals.values()) or 1.0
    return [{"phase": p, "s": totals[p], "pct": 100 * totals[p] / whole} for p in PHASES if totals.get(p)]


def _break(i: int, b: Any, inputs: HtmlInputs) -> dict[str, Any]:
    hints = [{"text": h.removeprefix("pt2doctor: "), "ours": h.startswith("pt2doctor:")} for h in b.hints]
    return {"n": i, "file": b.file, "line": b.line, "function": b.function, "count": b.count, "fatal": b.fatal,
            "reason": b.reason, "type": b.break_type, "explanation": b.explanation, "code": b.code,
            "gb_id": b.gb_id, "gb_url": b.gb_url, "hints": hints,
            "snippet": _snippet(inputs.snippets.get((b.file, b.line))),
            "cids": [{"text": str(c), "anchor": anchor(str(c))} for c in b.compile_ids]}


def _recompiles(chain: RecompileChain) -> dict[str, Any]:
    """One function's recompiles as analysis explained them: the same causes and fixes as the terminal."""
    return {
        "function": chain.function, "file": chain.file, "line": chain.line, "count": len(chain.steps),
        "limit": f"{chain.limit_hit.message} ({chain.limit_note})" if chain.limit_hit else None,
        "fixes": list(chain.fixes),
        "other_fixes": [fix for fix in chain.fixes if fix not in {s.fix for s in chain.steps}],
        "entries": [{"cid": str(step.recompile.compile_id), "anchor": anchor(str(step.recompile.compile_id)),
                     "cause": step.cause_words,
                     "source": str(step.cause.source) if step.cause and step.cause.source else None,
                     "hint": step.torch_hint, "also_failed": list(step.also_failed),
                     "fix": step.fix if step.fix not in (s.fix for s in chain.steps[:n]) else None,
                     "guards": [{"raw": g.raw, "kind": g.kind.value,
                                 "source": str(g.source) if g.source else None}
                                for g in step.recompile.guard_failures[:4]],
                     "more": max(len(step.recompile.guard_failures) - 4, 0), "reason": step.recompile.reason}
                    for n, step in enumerate(chain.steps)],
    }


def _compile(c: Compile, inputs: HtmlInputs, payloads: list[dict[str, Any]]) -> dict[str, Any]:
    cid = str(c.compile_id)
    ranked = sorted((k for k in inputs.artifacts if k[1] == cid), key=lambda k: (k[0] is not None, k[0] or 0))
    artifacts = []
    for rank, _ in ranked:
        items = inputs.artifacts[(rank, cid)]
        for a, label in zip(items, _labels(items)):
            label += f" · rank {rank}" if len(ranked) > 1 and rank is not None else ""
            ref = f"p{len(payloads)}"
            payloads.append({"id": ref, "text": a.text, "kind": a.kind, "size": a.size, "truncated": a.truncated})
            artifacts.append({"label": label, "ref": ref, "size": a.size, "truncated": a.truncated,
                              "lines": a.text.count("\n") + 1})
    cache = [e for k, events in inputs.cache_events.items() if k[1] == cid for e in events]
    return {"cid": cid, "anchor": anchor(cid), "function": c.function, "file": c.file, "line": c.line,
            "time": c.time_s or 0.0, "phases": {p: getattr(c.phases, p) for p in PHASES}, "ops": c.ops,
            "status": c.status, "breaks": c.graph_breaks, "recompile": c.compile_id.is_recompile,
            "cache": cache, "cache_hits": c.cache_hits, "cache_misses": c.cache_misses, "calls": c.calls,
            "fail": f"{c.fail_type}: {c.fail_reason}" if c.fail_type else None, "artifacts": artifacts}


def _labels(items: tuple[ArtifactText, ...]) -> list[str]:
    """Tab labels; Inductor's two graphs/codes of a training compile are its forward and backward."""
    total: dict[str, int] = defaultdict(int)
    for a in items:
        total[a.kind] += 1
    training = any(a.kind == "aot_backward_graph" for a in items)
    seen: dict[str, int] = defaultdict(int)
    out = []
    for a in items:
        seen[a.kind] += 1
        if total[a.kind] == 1:
            out.append(a.label)
        elif training and total[a.kind] == 2 and a.kind in _FWD_BWD:
            out.append(f"{a.label} · {'forward' if seen[a.kind] == 1 else 'backward'}")
        else:
            out.append(f"{a.label} ({seen[a.kind]})")
    return out


def _ranks(inputs: HtmlInputs) -> dict[str, Any] | None:
    if not inputs.rank_compiles:
        return None
    ranks = list(inputs.rank_compiles)
    by_cid: dict[str, dict[int, Compile]] = defaultdict(dict)
    for r, compiles in inputs.rank_compiles.items():
        for c in compiles:
            by_cid[str(c.compile_id)][r] = c
    rows = []
    for cid in sorted(by_cid, key=lambda t: tuple(int(x) for x in t.replace("_", "/").split("/"))):
        cells = [by_cid[cid].get(r) for r in ranks]
        rows.append({"cid": cid, "anchor": anchor(cid),
                     "function": next(c.function for c in cells if c is not None),
                     "cells": [None if c is None else {"time": c.time_s or 0.0, "status": c.status, "ops": c.ops}
                               for c in cells]})
    return {"ranks": ranks, "rows": rows}


def _extras(s: Session) -> list[dict[str, Any]]:
    out = []
    if s.accuracy:
        from pt2doctor.report.html_accuracy import accuracy_section

        out.append({"id": "extra-accuracy", "title": "Accuracy", "blocks": blocks_for(accuracy_section(s.accuracy))})
    for key, title in EXTRA_SECTIONS.items():
        value = getattr(s.extras, key)
        if value:
            out.append({"id": f"extra-{key}", "title": title, "blocks": blocks_for(to_builtins(value))})
    return out


def blocks_for(value: Any, label: str = "") -> list[dict[str, Any]]:
    """Render-ready blocks for an arbitrary JSON-like value, by shape."""
    if not isinstance(value, dict):
        value = {label or "value": value}
    scalars: list[tuple[str, str]] = []
    blocks: list[dict[str, Any]] = []
    for k, v in value.items():
        name = str(k).replace("_", " ")
        if isinstance(v, str) and ("\n" in v or len(v) > 200):
            lang = "markdown" if k.endswith(("md", "markdown")) or k in ("issue", "issue_md") else "python"
            blocks.append({"type": "code", "label": name, "text": v, "lang": lang})
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            cols = list(dict.fromkeys(c for row in v for c in row))
            blocks.append({"type": "table", "label": name, "cols": cols,
                           "rows": [[_cell(row.get(c)) for c in cols] for row in v]})
        elif isinstance(v, dict):
            blocks.append({"type": "group", "label": name, "blocks": blocks_for(v)})
        else:
            scalars.append((name, _cell(v)))
    return ([{"type": "kv", "rows": scalars}] if scalars else []) + blocks


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return ", ".join(_cell(x) for x in v)
    return str(v)


def _provenance(s: Session) -> list[tuple[str, str]]:
    e = s.environment
    started = dt.datetime.fromtimestamp(s.started_at).isoformat(sep=" ", timespec="seconds") if s.started_at else ""
    rows = [("command", " ".join(s.command)), ("cwd", s.cwd), ("started", started),
            ("exit", _exit_text(s)), ("torch", e.torch or s.torch_version or ""), ("python", e.python or ""),
            ("platform", e.platform or ""), ("CUDA", e.cuda or ""), ("GPU", e.gpu or ""),
            ("C++ compiler", e.compiler or ""), ("run directory", s.run_dir or ""),
            ("trace", ", ".join(s.trace.files[:4])
             + (f" (+{len(s.trace.files) - 4})" if len(s.trace.files) > 4 else "")),
            ("trace lines / events", f"{s.trace.lines} / {s.trace.events}"),
            ("ranks", ", ".join(map(str, s.trace.ranks))), ("session schema", s.schema)]
    return [(k, v) for k, v in rows if v]


def _exit_text(s: Session) -> str:
    x = s.exit
    if x.timed_out:
        return "timed out"
    if x.signal:
        return f"signal {x.signal}"
    return "" if x.code is None else f"code {x.code}"


def _notes(s: Session, inputs: HtmlInputs) -> list[str]:
    notes = []
    if s.trace.unreadable:
        notes.append(f"{s.trace.unreadable} unreadable trace line(s) were skipped (truncated or corrupted trace).")
    if s.trace.truncated:
        notes.append("The trace was truncated.")
    if inputs.omitted_artifacts:
        notes.append(f"{inputs.omitted_artifacts} artifact(s) were left out to keep this page small; "
                     "open the trace directory for them.")
    if s.compiles and not inputs.artifacts:
        notes.append("No graphs or code could be read from the trace (it was moved or deleted).")
    return notes

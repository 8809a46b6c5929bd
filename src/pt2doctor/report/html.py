"""The HTML report: one self-contained page (template + embedded JSON) a person would rather read than logs.

Contract:
- `render_html(report, inputs) -> str` is pure: no I/O beyond loading the package's own template,
  styles and script. The page needs no network: CSS, JS and data are inline, charts are inline SVG.
- Everything from the user's program is data, never markup: the template autoescapes every string
  (Jinja2 `autoescape=True`), and JSON placed in `<script type="application/json">` goes through
  `embed_json`, which escapes `<`, `>` and `&` so neither `</script>` nor `<!--` can end the block.
  The script builds code views with `textContent`/`createTextNode`, never `innerHTML`.
- Large runs stay usable: graph/code payloads are embedded one JSON block each and turned into DOM
  only when their section is opened; each is capped (`HtmlLimits`) with a "truncated" note.
- `write_html_report(report, path, inputs)` writes the page; the inputs (trace artifacts, source lines)
  are collected by `capture.report_inputs`, the only reading of files the page needs.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from pt2doctor.model.report_inputs import HtmlInputs
from pt2doctor.model.session import PHASE_LABELS
from pt2doctor.report.document import Report
from pt2doctor.report.html_charts import PHASES
from pt2doctor.report.html_data import page_data

_package = "pt2doctor"
_JSON_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026",
                 0x2028: "\\u2028", 0x2029: "\\u2029"}


def embed_json(value: Any) -> Markup:
    """JSON safe to place between `<script type="application/json">` tags (no `</`, no `<!--`)."""
    return Markup(json.dumps(value, ensure_ascii=False, separators=(",", ":")).translate(_JSON_ESCAPES))


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader(_package, "report/templates"),
        autoescape=True, trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined,
    )
    env.filters["tojson_safe"] = embed_json
    env.filters["seconds"] = _seconds
    env.filters["bytes"] = _bytes
    return env


@functools.cache
def inline_asset(name: str) -> Markup:
    # Our own static CSS/JS, inlined verbatim (never user data), so Markup is correct here.
    return Markup(resources.files(_package).joinpath("report").joinpath("templates").joinpath(name)
                  .read_text(encoding="utf-8"))


def render_html(report: Report, inputs: HtmlInputs | None = None) -> str:
    data = page_data(report, inputs or HtmlInputs())
    template = environment().get_template("report.html.j2")
    shown = [p for p in PHASES if report.analysis.phase_totals.get(p)] or list(PHASES[:1])  # the run's phases
    return template.render(page=data, phases=shown, labels=PHASE_LABELS, css=inline_asset("report.css"),
                           js=inline_asset("report.js"))


def write_html_report(report: Report, path: Path, inputs: HtmlInputs) -> Path:
    """Write `path` (a file, or `report.html` inside a directory); return the file written. `inputs` are
    what `capture.report_inputs.collect_html_inputs` read for the session."""
    target = path / "report.html" if path.is_dir() else path
    text = render_html(report, inputs)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(target)
    return target


def _seconds(value: float | None) -> str:
    if value is None:
        return "n/a"
    if value < 0.001:
        return f"{value * 1e6:.0f} µs"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    return f"{value:.2f} s"


def _bytes(value: float) -> str:
    for unit in ("B", "KB", "MB"):
        if value < 1024:
            return f"{value:.0f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"

"""The HTML renderer without a browser: escaping, data-driven sections, caps, ranks, the CLI."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from pt2doctor.capture.report_inputs import collect_html_inputs
from pt2doctor.cli.output import load_session
from pt2doctor.model import Category, Compile, CompileId, ExitInfo, Extras, Failure, GraphBreak, Phases, Session
from pt2doctor.model.minify import FailureKind, FailureSignature, MinifyResult, Stage
from pt2doctor.model.report_inputs import HtmlLimits
from pt2doctor.report.document import build_report
from pt2doctor.report.html import embed_json, render_html

EVIL = "<img src=x onerror=alert(1)>"


def _session(**extra: object) -> Session:
    cid = CompileId(0, 0)
    return Session(
        schema="pt2doctor.session/1", torch_version="2.13.0", command=(f"{EVIL}.py",), exit=ExitInfo(code=1),
        compiles=(Compile(cid, f"<b>{EVIL}</b>", f"{EVIL}.py", 3, 2, 0.5, "failed", Phases(0.4, 0.1), 100.0,
                          fail_type="X</script>", fail_reason=EVIL),),
        graph_breaks=(GraphBreak(f"</script><script>alert(1)</script>{EVIL}", f"{EVIL}.py", 4, EVIL, 2,
                                 hints=(f"pt2doctor: use `{EVIL}`",), code=EVIL, compile_ids=(cid,)),),
        failures=(Failure(Category.BACKEND_FAILURE, "ValueError", f"<!-- {EVIL}", file=f"{EVIL}.py", line=4,
                          compile_id=cid, chain=("a", f"ValueError: {EVIL}")),),
        cwd="/nonexistent", started_at=99.0, wall_s=2.0, extras=Extras(**extra),  # type: ignore[arg-type]
    )


def test_embedded_json_cannot_close_its_script_block() -> None:
    value = {"text": "</script><!-- <script>alert(1)</script> & \u2028"}
    out = str(embed_json(value))
    assert "</" not in out and "<!--" not in out and "<" not in out
    assert json.loads(out) == value


def test_user_strings_are_escaped_everywhere() -> None:
    html = render_html(build_report(_session()))
    body = html.split("<style>")[0] + html.split("</style>")[1]
    assert "<img" not in body and "<b><" not in body and "<!-- " not in body
    assert "&lt;b&gt;&lt;img src=x" in html
    assert re.findall(r'<script(?! type="application/json")', html) == ["<script"]  # ours only, no user script
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_sections_without_data_are_skipped() -> None:
    html = render_html(build_report(_session()))
    assert 'id="failures"' in html and 'id="breaks"' in html and 'id="timeline"' in html
    for absent in ('id="recompiles"', 'id="ranks"', 'id="extra-diagnosis"', 'id="extra-minify"'):
        assert absent not in html


def test_diagnosis_and_minify_extras_render_by_shape() -> None:
    diagnosis = {"category": "backend_failure", "stages": [{"stage": "eager", "result": "ok"},
                                                           {"stage": "aot_eager", "result": f"fails {EVIL}"}],
                 "issue_md": "# torch.compile fails\n\nsteps..."}
    minify = MinifyResult("g0001", Stage.AOT, FailureSignature(FailureKind.EXCEPTION, f"ValueError: {EVIL}"), 40, 2,
                          ("aten.relu.default",), (), 9, 1, 3.0, True, "/tmp/repro.py")
    html = render_html(build_report(_session(diagnosis=diagnosis, minify=minify)))
    assert 'id="extra-diagnosis"' in html and 'id="extra-minify"' in html
    assert "<th>stage</th>" in html and "aot_eager" in html and "fails &lt;img" in html
    assert "# torch.compile fails" in html and "ValueError: &lt;img" in html
    assert "nodes before" in html and "<td>yes</td>" in html and "aten.relu.default" in html


def test_real_run_page_has_every_compiles_graphs(real_run: Path) -> None:
    html = (real_run / "report.html").read_text()
    assert "Dynamo graph" in html and "AOT forward graph" in html and "AOT backward graph" in html
    assert "Inductor output code · forward" in html and "Guards" in html
    assert "cache: " in html and "How this report was produced" in html
    first = html.split('id="cid-0-0"')[1].split("</details>\n")[0]
    assert "No graphs or code" not in first  # artifacts of the restarted attempt 0/0_1 belong to 0/0


def test_payloads_are_capped_with_a_note(real_run: Path) -> None:
    session = load_session(real_run)
    inputs = collect_html_inputs(session, HtmlLimits(artifact_bytes=300))
    texts = [a for items in inputs.artifacts.values() for a in items]
    assert any(a.truncated and a.size > 300 and len(a.text) <= 300 for a in texts)
    html = render_html(build_report(session), inputs)
    assert " · truncated" in html


def test_report_cli_html_shows_ranks_side_by_side(real_run: Path, tmp_path: Path, cli: Any) -> None:
    log = next((real_run / "trace").glob("*.log"))
    traces = tmp_path / "trace"
    traces.mkdir()
    for rank in (0, 1):
        shutil.copy(log, traces / f"dedicated_log_torch_trace_rank_{rank}_x.log")
    out = tmp_path / "ranks.html"
    proc = cli("report", str(traces), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    assert 'id="ranks"' in html and "<th>rank 1</th>" in html and "rank 0 · toy_example" in html


def test_each_compile_says_how_often_its_graph_ran() -> None:
    """tlparse#46: the call count the child counted, per compile id."""
    from dataclasses import replace

    session = _session()
    session = replace(session, compiles=(replace(session.compiles[0], calls=1234),))
    assert "ran <b>1234</b> time(s)" in render_html(build_report(session))
    assert "ran <b>" not in render_html(build_report(_session()))  # not counted: not shown


def test_a_graph_break_links_to_pytorchs_page_for_it() -> None:
    url = "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0170.html"
    brk = GraphBreak("Data-dependent branching", "/w/t.py", 6, "f", 1, gb_id="GB0170", gb_url=url)
    html = render_html(build_report(replace(_session(), graph_breaks=(brk,))))
    assert f'href="{url}"' in html and 'rel="noreferrer"' in html


def test_table_headers_are_not_broken_inside_a_word() -> None:
    html = render_html(build_report(_session()))
    assert "word-break: keep-all" in html

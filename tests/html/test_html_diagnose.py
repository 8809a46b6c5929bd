"""The page `pt2doctor diagnose` writes, in a real headless Chromium: the stage table, repro and issue.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).parents[1] / "diagnose" / "scripts" / "custom_backend.py"


@pytest.fixture(scope="module")
def diagnose_page(diagnosed: Any, browser_context: Any) -> Any:
    run, _ = diagnosed(SCRIPT)  # shared with tests/diagnose when both run in one process
    assert run.code == 1, run.stderr[-2000:]
    out = run.out_dir
    page = browser_context.new_page()
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    url = (out / "report.html").as_uri()
    page.goto(url, wait_until="load")
    yield page, errors, [u for u in requests if u != url], out
    page.close()


def test_diagnosis_section_shows_stage_table_repro_and_issue(diagnose_page: Any, artifacts_dir: Path) -> None:
    page, errors, requests, out = diagnose_page
    assert errors == [] and requests == []
    section = page.locator("#extra-diagnosis")
    text = section.inner_text()
    assert "picky_backend" in text and "aot_eager_decomp_partition" in text
    assert "backend_failure" in text and "torch.sigmoid" in text
    assert "repro.py" in text and "issue.md" in text
    assert "def picky_backend" in text  # the repro, with the user's backend, inline
    section.screenshot(path=str(artifacts_dir / "diagnose.png"))


def test_the_diagnosis_leads_the_page(diagnose_page: Any, artifacts_dir: Path) -> None:
    page, _, _, _ = diagnose_page
    ids = page.eval_on_selector_all("main > section", "sections => sections.map(s => s.id)")
    assert ids[:2] == ["extra-diagnosis", "verdict"]
    page.screenshot(path=str(artifacts_dir / "diagnose-top.png"))

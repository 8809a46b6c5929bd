"""The HTML report in a real headless Chromium: loads clean and offline, shows what matters, stays inert."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="module")
def loaded(real_run: Path, browser_context: Any) -> Any:
    page = browser_context.new_page()
    events: dict[str, list[str]] = {"console": [], "requests": [], "dialogs": [], "errors": []}
    page.on("console", lambda m: events["console"].append(f"{m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: events["errors"].append(str(e)))
    page.on("request", lambda r: events["requests"].append(r.url))
    page.on("dialog", lambda d: (events["dialogs"].append(d.message), d.dismiss()))
    url = (real_run / "report.html").as_uri()
    page.goto(url, wait_until="load")
    page.wait_for_timeout(200)
    yield page, events, url
    page.close()


def test_loads_without_errors_or_network(loaded: Any) -> None:
    page, events, url = loaded
    assert events["console"] == [] and events["errors"] == []
    assert [u for u in events["requests"] if u != url] == []


def test_verdict_chart_and_breaks_are_visible(loaded: Any) -> None:
    page, _, _ = loaded
    assert page.locator("#verdict .headline").is_visible()
    assert "graph break" in page.locator("#verdict .headline").inner_text()
    assert page.locator("#verdict ol.actions li").count() >= 1
    bars = page.locator("svg.timeline a.bar")
    assert bars.count() >= 4 and bars.first.is_visible()
    assert page.locator("svg.breakdown rect.seg").first.is_visible()
    assert page.locator("#breaks .break").count() == 2
    hit = page.locator("#breaks .snippet tr.hit").first
    assert hit.is_visible() and "print(" in hit.inner_text()
    assert page.locator("#recompiles .guard").first.is_visible()


def test_collapsed_compile_expands_on_click_and_shows_inductor_code(loaded: Any) -> None:
    page, events, _ = loaded
    target = page.locator("details.cid", has=page.locator("summary code", has_text="small")).first
    assert target.get_attribute("open") is None
    target.locator("summary").first.click()
    assert target.get_attribute("open") is not None
    art = target.locator("details.art", has=page.locator("summary", has_text="Inductor output code")).first
    assert art.locator("pre").count() == 0  # lazy: no DOM before it is opened
    art.locator("summary").click()
    code = art.locator("pre.code")
    code.wait_for(state="visible")
    assert "def call" in code.inner_text() or "kernel" in code.inner_text()
    assert code.locator("span.k").count() > 0  # highlighted
    assert events["console"] == [] and events["errors"] == []


def test_bar_click_opens_its_compile(loaded: Any) -> None:
    page, _, _ = loaded
    page.locator("svg.timeline a.bar").first.click()
    page.wait_for_timeout(100)
    assert page.locator("details.cid.target[open]").count() == 1


def test_user_markup_stays_text(loaded: Any, evil_name: str) -> None:
    page, events, _ = loaded
    assert events["dialogs"] == []
    assert page.locator("img").count() == 0
    assert page.evaluate("document.querySelectorAll('script:not([type])').length") == 1
    assert evil_name in page.locator("header .script").inner_text()
    assert "<script>alert(2)</script>" in page.locator("#breaks").inner_text()


def test_screenshot(loaded: Any, artifacts_dir: Path) -> None:
    page, _, _ = loaded
    page.evaluate("window.scrollTo(0, 0)")
    path = artifacts_dir / "report.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000
    print(f"\nscreenshot: {path}")

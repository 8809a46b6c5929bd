"""Fixtures for the HTML report: one real run shared by every test, and a headless Chromium.

The run's script is named `<img src=x onerror=alert(1)>.py` and prints markup, so every page made
from it is also the escaping case (issue 6, "Safety"). It has graph breaks, a recompile and one
small Inductor compile (for AOT forward/backward graphs and output code), all in one child process.
The browser is Debian's chromium driven by Playwright; `install_browser.sh` installs both. The
tests skip only when that cannot be done here (not root, no chromium) and never under `CI=true`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
EVIL_NAME = "<img src=x onerror=alert(1)>.py"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

SCRIPT = '''\
import torch


def toy_example(a, b):
    x = a / (torch.abs(a) + 1)
    print("<script>alert(2)</script>")
    if b.sum() < 0:
        b = b * -1
    return x * b


def small(x, w):
    return torch.relu(x @ w).sum(dim=1)


compiled = torch.compile(toy_example, backend="eager")
compiled(torch.randn(10), torch.randn(10))
compiled(torch.randn(12), torch.randn(12))
x = torch.randn(4, 8, requires_grad=True)
w = torch.randn(8, 8, requires_grad=True)
torch.compile(small)(x, w).sum().backward()
'''


def pt2doctor(*args: str, cwd: Path | None = None, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("TORCH_TRACE", None)
    return subprocess.run([sys.executable, "-m", "pt2doctor", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env=env)


@pytest.fixture(scope="session")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`pt2doctor run --html` on the evil-named script; the run directory (with report.html)."""
    root = tmp_path_factory.mktemp("html-run")
    script = root / EVIL_NAME
    script.write_text(SCRIPT)
    out = root / "run"
    proc = pt2doctor("run", "--html", "--out", str(out), str(script), cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (out / "report.html").is_file(), proc.stderr
    return out


def _ensure_browser() -> str | None:
    """None when chromium and playwright are usable, else why not (after trying to install them)."""
    def ready() -> bool:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            return False
        return Path(CHROMIUM).exists()

    if ready():
        return None
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return "chromium or playwright missing and not root: run tests/html/install_browser.sh as root"
    proc = subprocess.run(["bash", str(HERE / "install_browser.sh")], capture_output=True, text=True,
                          env={**os.environ, "PYTHON": sys.executable}, timeout=900)
    if proc.returncode != 0 or not ready():
        return f"install_browser.sh failed: {proc.stderr[-500:]}"
    return None


@pytest.fixture(scope="session")
def browser_context() -> Iterator[Any]:
    why = _ensure_browser()
    if why is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"browser tests must run in CI: {why}")
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="pt2doctor-chromium-")
    try:
        with sync_playwright() as p:
            context = p.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True,
                viewport={"width": 1280, "height": 900})
            yield context
            context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="session")
def cli() -> Any:
    return pt2doctor


@pytest.fixture(scope="session")
def evil_name() -> str:
    return EVIL_NAME


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    path = HERE / "artifacts"
    path.mkdir(exist_ok=True)
    return path

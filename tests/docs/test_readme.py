"""The README is a landing page whose two set-up commands CI runs as they stand, and every link of the
README and docs/ leads somewhere."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from docs_blocks import ROOT, blocks, pages

LINK = re.compile(r"\]\((?P<target>[^)#\s]+)(?:#[^)]*)?\)")
PLACEHOLDER = re.compile(r"\[--|\.\.\.|\b[A-Z_]{3,}\b(?!=)")


def test_the_readme_is_a_landing_page():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 110


@pytest.mark.parametrize("name", ["demo", "tests"])
def test_ci_runs_the_readmes_own_commands_and_they_hold_no_placeholders(name):
    (block,) = [b for b in blocks(ROOT / "README.md") if b.ci == name]
    assert block.lang == "bash" and "\n" not in block.body
    assert not PLACEHOLDER.search(block.body), block.body
    printed = subprocess.run([sys.executable, str(ROOT / ".ci/readme_command.py"), str(ROOT / "README.md"), name],
                             capture_output=True, text=True, check=True).stdout
    assert printed.strip() == block.body
    assert f"readme_command.py README.md {name}" in (ROOT / ".ci/run").read_text()


def test_the_extractor_fails_on_a_missing_block(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\n```bash\npt2doctor demo\n```\n")
    done = subprocess.run([sys.executable, str(ROOT / ".ci/readme_command.py"), str(readme), "demo"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "ci: demo" in done.stderr and done.stdout == ""


def test_no_bash_block_holds_a_placeholder():
    """A ```bash block claims to run when pasted; synopses belong in ```text."""
    bad = [str(b) for page in pages() if page.exists() for b in blocks(page)
           if b.lang in ("bash", "sh") and re.search(r"\[--|\bSCRIPT\b|\bARGS\b|\.\.\.\]", b.body)]
    assert bad == []


def test_every_relative_link_leads_to_a_file():
    broken = []
    for page in pages():
        if not page.exists():
            continue
        for match in LINK.finditer(page.read_text()):
            target = match["target"]
            if "://" not in target and not target.startswith("mailto:") and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []

"""The README's and docs' fenced blocks, read the way `.ci/run` reads them (`.ci/readme_command.py`).

Conventions the tests hold the pages to: a ```bash block is a command that runs when pasted in the
repository's root with pt2doctor installed, and exits 0 or the status a trailing `# exits N` comment
names; a ```console block is the transcript of a real run (not run); ```text holds synopses with
placeholders. The README's blocks marked `<!-- ci: NAME -->` are CI's own, run by `.ci/run`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parents[2]
FENCE = re.compile(r"^(?P<marker><!-- ci: (?P<ci>\w+) -->\s*\n)?```(?P<lang>[\w-]*)\n(?P<body>.*?)\n```", re.M | re.S)
EXITS = re.compile(r"#\s*exits (\d+)\s*$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    body: str
    ci: str | None

    @property
    def expected_exit(self) -> int:
        match = EXITS.search(self.body.splitlines()[-1])
        return int(match[1]) if match else 0

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    return [Block(page, text.count("\n", 0, m.start()) + 1, m["lang"], m["body"], m["ci"])
            for m in FENCE.finditer(text)]

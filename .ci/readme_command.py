"""Print the shell command the README marks for CI: the fenced block after `<!-- ci: NAME -->`.

Usage: python .ci/readme_command.py README.md NAME. Exits 2, saying why, when the marker or its block is
missing, so that CI fails on a README whose commands moved rather than running nothing. Standard library
only: it runs before anything is installed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

BLOCK = r"<!-- ci: {name} -->\s*\n```(?:bash|sh)\n(?P<body>.*?)\n```"


def command(readme: str, name: str) -> str:
    match = re.search(BLOCK.format(name=re.escape(name)), readme, re.DOTALL)
    if match is None:
        raise LookupError(f"no ```bash block after <!-- ci: {name} --> in the README")
    return match["body"].strip()


def main(argv: list[str]) -> int:
    path, name = argv
    try:
        print(command(Path(path).read_text(), name))
    except LookupError as exc:
        print(f"readme_command: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

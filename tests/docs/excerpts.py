"""The console excerpts of the README and docs/, checked against real runs and rewritten from them.

A ```console block is the transcript of a real run. Its `$ ` lines are the commands; a page's blocks run
in order in one scratch directory (a later block reads what an earlier one wrote), which sees the
repository's `src/` and `tests/` as the docs' paths assume. Two comments, unseen on the rendered page,
say what a transcript needs that it does not show:

    <!-- excerpt-file: test_model.py -->      before a code block: the scratch directory holds it as that file
    <!-- excerpt-setup: COMMAND -->           before a console block: run first, its output not shown
    <!-- excerpt-needs: NAME -->              before a console block: run only where the environment variable
                                              NAME is set (a run that installs torch releases: gigabytes)

A line `...` stands for output left out. An excerpt matches its run when the run's output holds the
excerpt's lines in order with nothing between them but what a `...` stands for: numbers (times, counts,
line numbers), whitespace (wrapping, a table's width) and the scratch directory's path are free, words
are not.

    python tests/docs/excerpts.py [PAGE...]           run the pages' excerpts and say which no longer match
    python tests/docs/excerpts.py --write [PAGE...]   and rewrite those from their runs (whole: trim by hand)
    python tests/docs/excerpts.py --keep DIR [PAGE...] and keep every run's transcript in DIR
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from docs_blocks import FENCE, ROOT, Block, blocks, pages  # noqa: E402

SETUP = re.compile(r"<!-- excerpt-setup: (?P<command>.+?) -->\s*\n(?:<!-- .+ -->\s*\n)*$")
NEEDS = re.compile(r"<!-- excerpt-needs: (?P<name>\w+) -->\s*\n(?:<!-- .+ -->\s*\n)*$")
FILE = re.compile(r"<!-- excerpt-file: (?P<name>[\w./-]+) -->\s*\n$")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
NUMBER = re.compile(r"\d+(?:\.\d+)?")
BOX_RUN = re.compile(r"([─━═│┃╌┄=_-])\1+")  # rules drawn to the terminal's width
ELISION = "..."
SHARED = ("src", "tests")  # what the scratch directory sees of the repository
COMMAND_TIMEOUT_S = 900


@dataclass(frozen=True)
class Excerpt:
    block: Block
    setup: tuple[str, ...]  # commands run before, not shown
    needs: str | None = None  # an environment variable that must be set for it to run

    @property
    def commands(self) -> list[str]:
        return [line[2:] for line in self.block.body.splitlines() if line.startswith("$ ")]


def excerpts(page: Path) -> list[Excerpt]:
    text = page.read_text()
    found = []
    for block in blocks(page):
        if block.lang != "console":
            continue
        start = _offset(text, block.line)
        setup = tuple(m["command"] for m in [SETUP.search(text, 0, start)] if m)
        needs = NEEDS.search(text, 0, start)
        found.append(Excerpt(block, setup, needs["name"] if needs else None))
    return found


def _offset(text: str, line: int) -> int:
    return sum(len(x) + 1 for x in text.split("\n")[: line - 1])


def files(page: Path) -> dict[str, str]:
    """The page's code blocks marked `excerpt-file`, by the name the scratch directory holds them under."""
    text = page.read_text()
    named = {}
    for m in FENCE.finditer(text):
        marker = FILE.search(text, 0, m.start())
        if marker and marker.end() == m.start():
            named[marker["name"]] = m["body"] + "\n"
    return named


# --- reading a transcript the way an excerpt is matched -------------------------------------------------


def tokens(text: str) -> list[str]:
    """The words of `text`, with numbers, runs of box-drawing characters and whitespace made free."""
    return [BOX_RUN.sub(r"\1", NUMBER.sub("N", word)) for word in ANSI.sub("", text).split()]


def matches(excerpt: str, transcript: str) -> str | None:
    """None when `transcript` holds `excerpt` (see the module's docstring), else the first excerpt line
    that it does not hold where it should."""
    words = tokens(transcript)
    at, free = 0, False  # `free`: the text before the next part may be skipped
    for first_line, part in _parts(excerpt):
        if part == [ELISION]:
            free = True
            continue
        found = _find(words, part, at) if free else (at if words[at:at + len(part)] == part else -1)
        if found < 0:
            return first_line
        at, free = found + len(part), False
    return None if free or at == len(words) else f"(the run goes on: {' '.join(words[at:at + 12])} ...)"


def _parts(excerpt: str) -> list[tuple[str, list[str]]]:
    """The excerpt's lines as runs of words between elisions, each with its first line for the message."""
    parts: list[tuple[str, list[str]]] = []
    for line in excerpt.splitlines():
        if line.strip() == ELISION:
            parts.append((line, [ELISION]))
        elif line.strip():
            if parts and parts[-1][1] != [ELISION]:
                parts[-1][1].extend(tokens(line))
            else:
                parts.append((line, tokens(line)))
    return parts


def _find(words: list[str], part: list[str], start: int) -> int:
    for i in range(start, len(words) - len(part) + 1):
        if words[i:i + len(part)] == part:
            return i
    return -1


# --- running a page --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    excerpt: Excerpt
    transcript: str  # `$ command` lines and what each printed, the scratch directory's path taken out
    mismatch: str | None
    skipped: str = ""  # why it did not run


def run_page(page: Path) -> Iterator[Outcome]:
    with tempfile.TemporaryDirectory(prefix="excerpts-") as scratch:
        where = Path(scratch)
        for name in SHARED:
            (where / name).symlink_to(ROOT / name)
        for name, body in files(page).items():
            (where / name).write_text(body)
        for excerpt in excerpts(page):
            if excerpt.needs and not os.environ.get(excerpt.needs):
                yield Outcome(excerpt, "", None, skipped=f"needs {excerpt.needs} set")
                continue
            for command in excerpt.setup:
                _run(command, where)
            transcript = _transcript(excerpt.commands, where)
            yield Outcome(excerpt, transcript, matches(excerpt.block.body, transcript))


def _transcript(commands: list[str], where: Path) -> str:
    shown, last = [], 0
    for command in commands:
        if command.strip() == "echo $?":
            out = f"{last}\n"
        else:
            last, out = _run(command, where)
        shown.append(f"$ {command}\n{out}")
    return "".join(shown)


def _run(command: str, where: Path) -> tuple[int, str]:
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", COLUMNS="104", NO_COLOR="1",
               TERM="dumb", PYTHONUNBUFFERED="1")
    for name in ("TORCH_TRACE", "FORCE_COLOR", "CI"):
        env.pop(name, None)
    done = subprocess.run(["bash", "-c", command], cwd=where, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=COMMAND_TIMEOUT_S)
    out = done.stdout
    for path in (str(where.resolve()), str(where), str(ROOT)):
        out = out.replace(path + "/", "").replace(path, ".")
    return done.returncode, out


def rewrite(page: Path, outcomes: list[Outcome]) -> None:
    """Each drifted block of `page` replaced by its run's whole transcript."""
    text = page.read_text()
    for outcome in reversed(outcomes):  # from the end, so that earlier offsets hold
        if outcome.mismatch is None:
            continue
        start = _offset(text, outcome.excerpt.block.line)
        old = text[start:].split("\n```", 1)[0]
        text = text[:start] + "```console\n" + outcome.transcript.rstrip("\n") + text[start + len(old):]
    page.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pages", nargs="*", type=Path)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--keep", type=Path, help="write each block's transcript to KEEP/PAGE-LINE.txt")
    args = parser.parse_args(argv)
    drifted = 0
    for page in [p.resolve() for p in args.pages] or [p for p in pages() if p.exists() and excerpts(p)]:
        outcomes = []
        for outcome in run_page(page):
            outcomes.append(outcome)
            state = (f"skipped ({outcome.skipped})" if outcome.skipped else
                     "ok" if outcome.mismatch is None else f"DRIFTED at: {outcome.mismatch}")
            print(f"{outcome.excerpt.block}: {state}", flush=True)
            if args.keep is not None and not outcome.skipped:
                args.keep.mkdir(parents=True, exist_ok=True)
                (args.keep / f"{page.stem}-{outcome.excerpt.block.line}.txt").write_text(outcome.transcript)
            drifted += outcome.mismatch is not None
        if args.write:
            rewrite(page, outcomes)
    return 1 if drifted else 0


if __name__ == "__main__":
    sys.exit(main())

"""Every console excerpt of the README and docs/ is a real run's transcript that still matches what the
commands print (tests/docs/excerpts.py says how they are read; `--write` rewrites the ones that drifted)."""

from __future__ import annotations

import pytest
from docs_blocks import pages
from excerpts import excerpts, matches, run_page

PAGES = [page for page in pages() if page.exists() and excerpts(page)]


def test_an_excerpt_leaves_numbers_and_wrapping_free_but_not_words():
    run = "$ pt2doctor diagnose x.py\nrepro: repro.py (3 node(s); verified in 2/2 runs)\nwrote issue.md\n"
    assert matches("$ pt2doctor diagnose x.py\nrepro: repro.py (7 node(s);\n  verified in 9/9 runs)\nwrote issue.md",
                   run) is None
    assert matches("$ pt2doctor diagnose x.py\nrepro: repro.py (7 node(s); flaky in 2/2 runs)\nwrote issue.md",
                   run) == "$ pt2doctor diagnose x.py"
    assert matches("$ pt2doctor diagnose x.py\n...\nwrote issue.md", run) is None
    assert matches("...\nverified in 2/2 runs)\n...", run) is None
    assert matches("$ pt2doctor diagnose x.py\n...\nwrote report.html", run) == "wrote report.html"
    assert matches("$ pt2doctor diagnose x.py\n", run).startswith("(the run goes on: repro:")


def test_a_table_of_another_width_still_matches():
    narrow = "┏━━━━━┳━━━━━━┓\n┃ a   ┃ b    ┃\n┡━━━━━╇━━━━━━┩\n"
    assert matches("┏━━━━━━━━━━┳━━━┓\n┃ a        ┃ b ┃\n┡━━━━━━━━━━╇━━━┩", narrow) is None


def test_every_console_block_is_a_transcript_of_commands():
    """A block whose first line is not a `$ ` command is nothing a run can check."""
    assert PAGES
    bad = [str(e.block) for page in PAGES for e in excerpts(page) if not e.block.body.startswith("$ ")]
    assert bad == []


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_pages_excerpts_match_their_runs(page):
    drifted = [f"{o.excerpt.block}: no longer printed: {o.mismatch}\n--- the run printed:\n{o.transcript}"
               for o in run_page(page) if o.mismatch is not None]
    assert not drifted, "\n\n".join(drifted) + "\n(python tests/docs/excerpts.py --write rewrites them)"

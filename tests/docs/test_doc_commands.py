"""Every ```bash block of the README and docs/ runs when pasted in the repository's root (CI's own two
blocks are `.ci/run`'s, not run again here)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from docs_blocks import ROOT, blocks, pages

RUNNABLE = [b for page in pages() if page.exists() for b in blocks(page) if b.lang in ("bash", "sh") and b.ci is None]


@pytest.mark.slow
@pytest.mark.parametrize("block", RUNNABLE, ids=str)
def test_the_block_runs_as_written(block, tmp_path):
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    env.pop("TORCH_TRACE", None)
    done = subprocess.run(["bash", "-c", block.body], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == block.expected_exit, (done.stdout[-2000:], done.stderr[-3000:])

#!/usr/bin/env bash
# Install what tests/html needs: Debian's chromium and Playwright's Python package.
# Playwright's own browser download is never used (no internet in CI): the tests drive
# /usr/bin/chromium through `executable_path`. Idempotent; needs root for apt-get.
set -euo pipefail
PY="${PYTHON:-$(command -v python || command -v python3)}"
if ! command -v chromium >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
fi
if ! "$PY" -c "import playwright" >/dev/null 2>&1; then
    "$PY" -m pip install -q playwright
fi
chromium --version 2>/dev/null
"$PY" -c "import playwright, importlib.metadata as m; print('playwright', m.version('playwright'))"

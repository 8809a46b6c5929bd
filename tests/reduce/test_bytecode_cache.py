"""Where torch has no bytecode beside it, pt2doctor's own interpreters keep theirs in its cache."""

from __future__ import annotations

import os
import subprocess
import sys

from pt2doctor.capture import bytecode_cache


def test_nothing_changes_where_torch_has_its_bytecode(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "pycache_prefix", None)
    torch_init = bytecode_cache.importlib.util.find_spec("torch").origin
    has_it = os.path.exists(bytecode_cache.importlib.util.cache_from_source(torch_init))
    assert bytecode_cache.torch_lacks_bytecode() is not has_it  # as on this machine
    monkeypatch.setattr(bytecode_cache, "torch_lacks_bytecode", lambda: False)  # as after a pip install
    env = bytecode_cache.worker_env({"PYTHONDONTWRITEBYTECODE": "1"})
    assert env == {"PYTHONDONTWRITEBYTECODE": "1"}


def test_workers_write_and_share_bytecode_where_torch_has_none(monkeypatch, tmp_path):
    # Where Python would look for torch's bytecode under an empty prefix, there is none: as in an
    # image built with PYTHONDONTWRITEBYTECODE=1.
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "empty"))
    assert bytecode_cache.torch_lacks_bytecode()
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(bytecode_cache, "torch_lacks_bytecode", lambda: True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    env = bytecode_cache.worker_env({"PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin",
                                     "PYTHONPATH": os.environ.get("PYTHONPATH", "")})
    cache = tmp_path / "pt2doctor" / "pycache"
    assert env["PYTHONPYCACHEPREFIX"] == str(cache) and "PYTHONDONTWRITEBYTECODE" not in env
    subprocess.run([sys.executable, "-c", "import pt2doctor.capture.bytecode_cache"], env=env, check=True)
    assert list(cache.rglob("bytecode_cache.*.pyc"))  # written where the next worker reads it
    assert bytecode_cache.worker_env({"PYTHONPYCACHEPREFIX": "/mine"}) == {"PYTHONPYCACHEPREFIX": "/mine"}


def test_the_cli_process_uses_the_cache_it_gives_its_workers(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(bytecode_cache, "torch_lacks_bytecode", lambda: True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    bytecode_cache.use_in_this_process()
    assert sys.pycache_prefix == str(tmp_path / "pt2doctor" / "pycache") and not sys.dont_write_bytecode
    assert bytecode_cache.worker_env({})["PYTHONPYCACHEPREFIX"] == sys.pycache_prefix

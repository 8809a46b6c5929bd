"""The recorder's choice about AOTAutograd's cache: `run --record` must stay cheap, so it leaves the
cache alone; the failure workflows (`diagnose`, `minify --script`) turn it off to see every
after-AOT graph. Real torch config, no compile needed."""

import os

import pytest
import torch._functorch.config as functorch_config

from pt2doctor.capture import graph_recorder


@pytest.mark.parametrize(("every_aot_graph", "env", "cache_while_recording"), [
    (None, None, True),    # `pt2doctor run --record`
    (None, "1", False),    # a diagnose run (PT2DOCTOR_RECORD_AOT=1)
    (True, None, False),   # `minify --script`
])
def test_aot_cache_off_only_when_every_after_aot_graph_is_wanted(tmp_path, monkeypatch, every_aot_graph, env,
                                                                  cache_while_recording):
    if env:
        monkeypatch.setenv(graph_recorder.EVERY_AOT_GRAPH_ENV, env)
    else:
        monkeypatch.delenv(graph_recorder.EVERY_AOT_GRAPH_ENV, raising=False)
    before = functorch_config.enable_autograd_cache
    uninstall = graph_recorder.install(tmp_path, every_aot_graph=every_aot_graph)
    try:
        assert functorch_config.enable_autograd_cache == (before if cache_while_recording else False)
    finally:
        uninstall()
    assert functorch_config.enable_autograd_cache == before
    assert os.path.isdir(tmp_path / "graphs")

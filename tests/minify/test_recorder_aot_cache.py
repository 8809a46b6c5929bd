"""The recorder's choice about AOTAutograd's cache: `run --record` must stay cheap, so it leaves the
cache alone; the failure workflows (`diagnose`, `minify --script`) turn it off to see every
after-AOT graph. Real torch config, no compile needed."""

import os
from pathlib import Path

import pytest
import torch._functorch.config as functorch_config

from pt2doctor.capture.child import graph_recorder
from pt2doctor.diagnose.runs import ScriptCall, VariantRunner
from pt2doctor.diagnose.variants import Variant


@pytest.mark.parametrize(("every_aot_graph", "cache_while_recording"), [
    (False, True),   # `pt2doctor run --record`
    (True, False),   # a diagnose run, `minify --script`
])
def test_aot_cache_off_only_when_every_after_aot_graph_is_wanted(tmp_path, every_aot_graph, cache_while_recording):
    before = functorch_config.enable_autograd_cache
    uninstall = graph_recorder.install(tmp_path, every_aot_graph=every_aot_graph)
    try:
        assert functorch_config.enable_autograd_cache == (before if cache_while_recording else False)
    finally:
        uninstall()
    assert functorch_config.enable_autograd_cache == before
    assert os.path.isdir(tmp_path / "graphs")


def test_a_diagnose_recording_asks_the_child_for_every_after_aot_graph(tmp_path):
    """The recording variant's child spec turns the recorder's `every_aot_graph` on; the others record nothing."""
    runner = VariantRunner(ScriptCall(Path("user.py"), (), tmp_path, None), 1, reporter=None)  # type: ignore[arg-type]
    try:
        recording = runner.options(Variant.original(1, record=True))
        plain = runner.options(Variant.with_backend("eager"))
    finally:
        runner.close()
    assert recording.record_graphs and recording.hooks.record_every_aot_graph
    assert recording.hooks.frame_record_dir == str(tmp_path / "runs" / "original-1" / "frames")
    assert not plain.record_graphs and not plain.hooks.record_every_aot_graph
    assert plain.hooks.overrides is not None and plain.hooks.overrides.compile_kwargs == {"backend": "eager"}

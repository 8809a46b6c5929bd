"""The recorder's choice about AOTAutograd's cache: `run --record` must stay cheap, so it leaves the
cache alone; the failure workflows (`diagnose`, `minify --script`) turn it off to see every
after-AOT graph, but for diagnose's first run, which keeps it on as the user's run does and says which graphs it
served (real Inductor compiles of a training step, on caches of the test's own); where no recorded graph shows the
failure and the cache served one, diagnose records again with it off (`diagnose.aot_cache.hidden_by_aot_cache`)."""

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch._functorch.config as functorch_config

from pt2doctor.capture.child import graph_recorder
from pt2doctor.capture.process_meta import RunPaths
from pt2doctor.diagnose.aot_cache import hidden_by_aot_cache
from pt2doctor.diagnose.runs import ScriptCall, VariantRunner
from pt2doctor.diagnose.variants import Variant
from pt2doctor.model import Category
from pt2doctor.model.child import ChildSpec, Hooks
from pt2doctor.model.minify import DEFAULT_TOLERANCE, Stage
from pt2doctor.model.recording import GraphEntry, GraphFailure, read_cached, read_index
from pt2doctor.model.serialize import append_line, write_record
from pt2doctor.processes import launch


@pytest.mark.parametrize(("every_aot_graph", "keep", "cache_while_recording"), [
    (False, False, True),  # `pt2doctor run --record`
    (True, False, False),  # a diagnose run but the first, `minify --script`
    (True, True, True),  # diagnose's first run: the graphs the cache serves are said (`cached.jsonl`)
])
def test_aot_cache_off_only_when_every_after_aot_graph_is_wanted(tmp_path, every_aot_graph, keep,
                                                                 cache_while_recording):
    before = functorch_config.enable_autograd_cache
    uninstall = graph_recorder.install(tmp_path, every_aot_graph=every_aot_graph, keep_aot_cache=keep)
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
    assert recording.hooks.record_keeps_aot_cache  # the first run, as the user's run does
    assert not runner.options(Variant.every_aot_graph(DEFAULT_TOLERANCE)).hooks.record_keeps_aot_cache
    assert not runner.options(Variant.original(4, record=True)).hooks.record_keeps_aot_cache
    assert recording.hooks.frame_record_dir == str(tmp_path / "runs" / "original-1" / "frames")
    assert not plain.record_graphs and not plain.hooks.record_every_aot_graph
    assert plain.hooks.overrides is not None and plain.hooks.overrides.compile_kwargs == {"backend": "eager"}


# a training step under Inductor: one Dynamo graph, its forward and backward after AOT
TRAIN_STEP = """
import torch

f = torch.compile(lambda x, w: (x @ w).relu().sum())
w = torch.ones(8, 8, requires_grad=True)
f(torch.arange(32.0).reshape(4, 8) / 32, w).backward()
print("grad", float(w.grad.sum()))
"""


@dataclass(frozen=True)
class Recorded:
    run_dir: Path
    output: str
    index: list[GraphEntry]
    served: list[str]  # the Dynamo graphs whose after-AOT graphs AOTAutograd's cache served


def _recorded(script: Path, run_dir: Path, caches: Path) -> Recorded:
    """The script run by the child as diagnose's first run records it (AOTAutograd's cache kept on, each graph's
    first call judged), on the compile caches in `caches`."""
    run_dir.mkdir()
    spec = ChildSpec(record_dir=str(run_dir), hooks=Hooks(record_every_aot_graph=True, record_keeps_aot_cache=True,
                                                          record_accuracy_tolerance=DEFAULT_TOLERANCE))
    write_record(run_dir / "child-spec.json", spec)
    ran = launch.run([sys.executable, "-m", "pt2doctor.capture.child", "--spec", str(run_dir / "child-spec.json"),
                      str(script)], cwd=script.parent, timeout_s=600, env=_caches_in(caches))
    assert ran.returncode == 0, ran.stderr[-3000:]
    graphs = RunPaths(run_dir).graphs_dir
    return Recorded(run_dir, ran.stdout, read_index(graphs), [c.graph for c in read_cached(graphs)])


def _caches_in(caches: Path) -> dict[str, str]:
    return {**os.environ, **launch.compile_caches_in(caches), "PYTHONPATH": str(Path(__file__).parents[2] / "src")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Recorded]:
    """The training step run plainly (which writes AOTAutograd's cache), then recorded twice: on those caches (the
    cache serves its graph) and on a copy without AOTAutograd's entries (it misses; Inductor's own cache still hits,
    so nothing is compiled anew)."""
    root = tmp_path_factory.mktemp("aot-cache")
    script = root / "train.py"
    script.write_text(TRAIN_STEP)
    warm = root / "caches"
    plain = launch.run([sys.executable, str(script)], cwd=root, timeout_s=600, env=_caches_in(warm))
    assert plain.returncode == 0, plain.stderr[-3000:]
    cold = root / "caches-without-aot"
    shutil.copytree(warm, cold)
    for entries in list(cold.rglob("aotautograd")):
        shutil.rmtree(entries)
    plain_run = Recorded(root, plain.stdout, [], [])
    return {"plain": plain_run, "served": _recorded(script, root / "served", warm),
            "missed": _recorded(script, root / "missed", cold)}


def test_a_graph_the_cache_serves_is_said_and_recorded_at_the_torch_level(runs):
    served = runs["served"]
    assert served.output == runs["plain"].output  # observing never changes the program
    dynamo = [e.id for e in served.index if e.stage is Stage.DYNAMO]
    assert served.served == dynamo and len(dynamo) == 1
    assert not [e for e in served.index if e.stage is Stage.AOT]  # no after-AOT graph was traced


def test_a_graph_the_cache_misses_is_recorded_after_aot_with_the_cache_on(runs):
    missed = runs["missed"]
    assert missed.output == runs["plain"].output
    assert missed.served == []
    assert sorted(str(e.aot_kind) for e in missed.index if e.stage is Stage.AOT) == ["backward", "forward"]


@pytest.mark.parametrize(("category", "died", "failure", "hidden"), [
    (Category.ACCURACY, False, None, True),  # a wrong gradient: no graph judged wrong at the torch level
    (Category.USER_ERROR, False, None, True),  # the program's own check, which a wrong backward may fail
    (Category.RUNTIME_CRASH, True, None, True),  # a kernel of a served graph may have killed it
    # the served graph failed: its after-AOT graphs name the culprit's aten ops, as on cold caches
    (Category.ACCURACY, False, GraphFailure("g0000", "accuracy", "AccuracyMismatch: wrong"), True),
    (Category.KERNEL_FAILURE, False, GraphFailure("g0000", "run", "RuntimeError: boom"), True),
    # another graph failed to compile (never served): the recording stands as it is
    (Category.BACKEND_FAILURE, False, GraphFailure("g0001", "compile", "NotImplementedError: no"), False),
    (Category.DYNAMO_INTERNAL, False, None, False),  # no compiled graph's failure
])
def test_a_failure_no_recorded_graph_shows_is_recorded_again_where_the_cache_served_its_graph(
        runs, tmp_path, category, died, failure, hidden):
    run_dir = tmp_path / "run"
    shutil.copytree(runs["served"].run_dir, run_dir)
    if failure is not None:
        with open(RunPaths(run_dir).graphs_dir / "failures.jsonl", "a") as failures:
            append_line(failures, failure)
    why = hidden_by_aot_cache(run_dir, category, died)
    assert (why is not None) == hidden
    assert why is None or "AOTAutograd's cache served 1 graph(s)" in why


def test_a_recording_the_cache_served_nothing_is_not_made_again(runs):
    assert hidden_by_aot_cache(runs["missed"].run_dir, Category.ACCURACY, True) is None

"""The typed records between processes (`model.recording`, `model.child`, the bisection's job and result)
and the documents they feed (session.json, diagnosis.json): one codec, strict readers, the same JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pt2doctor.diagnose.reproduce import recorded_backend_spec
from pt2doctor.model import SCHEMA, ExitInfo, Extras, Session
from pt2doctor.model.accuracy import MinifySummary
from pt2doctor.model.child import AccuracyProbeSpec, ChildReport, ChildSpec, ExceptionRecord, Hooks, Overrides
from pt2doctor.model.diagnosis import Bisection, BisectJob, Diagnosis, FailingStage
from pt2doctor.model.ids import SourceLoc
from pt2doctor.model.minify import (
    BackendKind,
    BackendSpec,
    FailureKind,
    FailureSignature,
    MinifyResult,
    ScalarSpec,
    Stage,
    TensorSpec,
)
from pt2doctor.model.recording import GraphEntry, GraphFailure, read_failures, read_index
from pt2doctor.model.serialize import RecordError, append_line, dumps, loads, read_record, to_builtins, write_record

TESTS = Path(__file__).parents[1]

ENTRY = GraphEntry(
    id="g0001", stage=Stage.AOT, compile_id="0/0", parent="g0000", aot_kind="forward",
    backend=BackendSpec(BackendKind.NAMED, "inductor"), config=("torch._inductor.config.x = 1",),
    inputs=(TensorSpec((2, 3), (3, 1), "float32", "cuda:0", dynamic=(0,)), ScalarSpec(4, dynamic=True)),
    nodes=3, submodules={"cond_true_0": "g0001.cond_true_0.py"},
)
RESULT = MinifyResult("g0001", Stage.AOT, FailureSignature(FailureKind.EXCEPTION, "RuntimeError: boom"), 9, 1,
                      ("aten.relu.default",), ("aten.relu.default",), 12, 3, 4.5, True, "/tmp/repro.py")


@pytest.mark.parametrize("record", [
    ENTRY,
    GraphFailure("g0001", "accuracy", "AccuracyMismatch: differs", tolerance=1e-4, values="g0001.inputs.pt"),
    ChildSpec(meta="/r/child.json", crash_log="/r/crash.txt", timeout_s=30.0, record_dir="/r", count_calls=True,
              hooks=Hooks(overrides=Overrides(compile_kwargs={"backend": "eager"}, seed=0),
                          accuracy_probe=AccuracyProbeSpec("/r/accuracy.jsonl", 1e-3), record_every_aot_graph=True)),
    ChildReport(exit_code=1, wall_s=0.5, calls={"0/0": 3}, torch_imported=True,
                exception=ExceptionRecord("ValueError", "boom", ("ValueError: boom",), (SourceLoc("a.py", 3, "f"),))),
    BisectJob("/r/repro.py", "RuntimeError: boom", "/r/bisect.json", "inductor", 4),
    Bisection("inductor", "lowerings", 2, "relu", 7, 1.5, ""),
    MinifySummary.of(RESULT, 4.5),
    Extras(torch_imported=True, minify=RESULT),
], ids=lambda r: type(r).__name__)
def test_every_record_round_trips_through_the_codec(record, tmp_path):
    assert loads(dumps(record), type(record)) == record
    write_record(tmp_path / "record.json", record)
    assert read_record(tmp_path / "record.json", type(record)) == record


def test_index_lines_keep_their_documented_keys_and_tag_the_input_specs():
    doc = json.loads(dumps(ENTRY))
    assert list(doc) == ["id", "stage", "compile_id", "parent", "aot_kind", "backend", "config", "inputs", "nodes",
                         "constants", "submodules", "values", "origins", "grad_enabled"]
    assert doc["inputs"][0]["kind"] == "tensor" and doc["inputs"][1] == {"kind": "scalar", "value": 4, "dynamic": True}
    assert doc["backend"] == {"kind": "named", "name": "inductor", "source": ""}


def test_a_failure_line_leaves_out_what_it_does_not_have():
    assert json.loads(dumps(GraphFailure("g0000", "run", "ValueError: x"))) == {
        "graph": "g0000", "phase": "run", "description": "ValueError: x"}


def _index(tmp_path: Path, *lines: str) -> Path:
    graphs = tmp_path / "graphs"
    graphs.mkdir(parents=True)
    (graphs / "index.jsonl").write_text("".join(line + "\n" for line in lines))
    return graphs


def test_a_malformed_index_line_is_rejected_with_its_file_and_line(tmp_path):
    good = dumps(ENTRY).decode()
    graphs = _index(tmp_path, good, json.dumps({"stage": "dynamo", "nodes": 1}))
    with pytest.raises(RecordError, match=r"index\.jsonl, line 2: not a GraphEntry record: .*`id`"):
        read_index(graphs)
    (graphs / "failures.jsonl").write_text('{"graph": "g0000", "phase": "compile", "desc')
    with pytest.raises(RecordError, match=r"failures\.jsonl, line 1"):
        read_failures(graphs)


def test_the_recorder_and_the_readers_agree(tmp_path):
    graphs = tmp_path / "graphs"
    graphs.mkdir()
    with open(graphs / "index.jsonl", "w") as handle:
        append_line(handle, ENTRY)
    with open(graphs / "failures.jsonl", "w") as handle:
        append_line(handle, GraphFailure("g0001", "compile", "RuntimeError: boom"))
    assert read_index(graphs) == [ENTRY] and read_failures(graphs)[0].tolerance is None


def test_the_device_is_read_from_the_recorded_inputs_not_guessed_from_the_text(tmp_path):
    """A CPU graph whose config line or backend name says "cuda" is not on a GPU; a graph with an
    input on `cuda:0` is, whatever else the line holds."""
    cpu = GraphEntry(id="g0000", stage=Stage.DYNAMO, backend=BackendSpec(BackendKind.SOURCE, "my_cuda_backend"),
                     config=('x = {"device": "cuda"}',), inputs=(TensorSpec((2,), (1,)),))
    _index(tmp_path / "cpu", dumps(cpu).decode())
    assert recorded_backend_spec(tmp_path / "cpu") == (cpu.backend, False)
    _index(tmp_path / "gpu", dumps(cpu).decode(), dumps(ENTRY).decode())
    assert recorded_backend_spec(tmp_path / "gpu") == (cpu.backend, True)
    assert recorded_backend_spec(tmp_path / "none") == (None, False)


def test_a_failure_naming_a_graph_the_index_lacks_is_nothing_to_minify(tmp_path):
    from pt2doctor.reduce.fx_load import NothingToMinify, load_failing

    graphs = _index(tmp_path, dumps(ENTRY).decode())
    (graphs / "failures.jsonl").write_text(dumps(GraphFailure("g0042", "run", "ValueError: x")).decode() + "\n")
    with pytest.raises(NothingToMinify, match="g0042"):
        load_failing(tmp_path)


def test_overrides_reject_an_unknown_key():
    with pytest.raises(Exception, match="inductor_confg"):
        loads('{"inductor_confg": {"fallback_random": true}}', Overrides)


def test_extras_keep_session_json_shape():
    """`extras` is written as before: only what is set, `minify` as minify.json's object."""
    session = Session(SCHEMA, None, (), ExitInfo(0), extras=Extras(torch_imported=True, minify=RESULT))
    extras = to_builtins(session)["extras"]
    assert extras == {"torch_imported": True, "minify": to_builtins(RESULT)}
    old = json.dumps({**to_builtins(session), "extras": {"source": "trace", "advisor": {"x": 1}}})
    assert loads(old, Session).extras == Extras(source="trace", advisor={"x": 1})


def test_a_real_session_round_trips_with_its_json_unchanged(run_json):
    run = run_json("fullgraph_break.py")
    doc = json.loads((run.out_dir / "session.json").read_text())
    session = loads(json.dumps(doc), Session)
    analysis = ("findings", "verdict")  # written beside the session by the CLI
    assert json.loads(dumps(session)) == {k: v for k, v in doc.items() if k not in analysis}
    assert doc["extras"] == {"torch_imported": True}
    assert doc["failures"][0]["category"] == "graph_break"


@pytest.mark.slow  # a whole diagnosis of its own (30-80 s): the default run stays under 20 min
def test_a_real_diagnosis_round_trips_with_its_json_unchanged(diagnosed):
    # the options of tests/diagnose/test_diagnose.py's run of the same script, so the run is shared
    _run, doc = diagnosed(TESTS / "diagnose" / "scripts" / "dynamo_failure.py", options=("--program-budget", "30"))
    diagnosis = loads(json.dumps(doc), Diagnosis)
    assert json.loads(dumps(diagnosis)) == doc
    assert diagnosis.stage is FailingStage.DYNAMO and doc["stage"] == "dynamo" and doc["category"] == "graph_break"
    assert all(isinstance(f, SourceLoc) for f in diagnosis.user_frames)
    assert {"file", "line"} <= set(doc["user_frames"][0]) and isinstance(doc["user_frames"][0]["line"], int)
    assert all(isinstance(a["category"], (str, type(None))) for a in doc["attempts"])


def test_the_model_imports_nothing_but_itself_msgspec_and_the_standard_library():
    import ast
    import sys

    model = TESTS.parent / "src" / "pt2doctor" / "model"
    for path in model.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            for name in names:
                top = name.split(".")[0]
                assert name.startswith("pt2doctor.model") or top in ("msgspec", "__future__") \
                    or top in sys.stdlib_module_names, f"{path.name} imports {name}"

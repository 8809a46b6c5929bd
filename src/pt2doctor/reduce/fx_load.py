"""Load what `capture.graph_recorder` wrote under `RUN_DIR/graphs/` and pick the graph to minify.

Contract: `load_failing(run_dir)` returns a `RecordedFailure` (the graph as an `FxCase`, how to
compile it, the recorded signature when there is one) or raises `NothingToMinify`. Choice:
1. a recorded failure: an after-AOT graph is preferred over the Dynamo graph it came from (the
   exception passes through both), and a run-time failure of a Dynamo graph compiled by Inductor
   is blamed on its forward/inference AOT graph;
2. no recorded exception but the `inflight` marker names a graph: the process died of a signal
   while compiling or running it (the signal itself is observed again in the worker);
   A recorded accuracy failure (the recorder's fp64-referenced check) makes the context an
   accuracy check with the recorded tolerance, without `accuracy=True`;
3. otherwise `NothingToMinify`, unless `accuracy=True`, in which case the last graph is
   minified against the fp64-referenced accuracy check (the oracle confirms it fails).
A recorded failure that is only a wrapper (`SubprocException` from Inductor's compile workers)
gives no expected signature: the first isolated run of the graph fixes the target.
Only `graphs/` is needed; `session.json` is not read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.fx

from pt2doctor.model.minify import ACCURACY_TYPE, BackendKind, BackendSpec, FailureSignature, Stage, input_spec_from_dict
from pt2doctor.reduce.fx_case import FxCase, initial_case, make_base
from pt2doctor.reduce.oracle import ReproContext
from pt2doctor.reduce.signature import from_description


class NothingToMinify(RuntimeError):
    pass


@dataclass(frozen=True)
class RecordedFailure:
    graph_id: str
    case: FxCase
    context: ReproContext
    expected: FailureSignature | None


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def load_graph_module(graphs: Path, entry: dict[str, Any]) -> torch.fx.GraphModule:
    namespace: dict[str, Any] = {}
    exec(compile((graphs / f"{entry['id']}.py").read_text(), f"{entry['id']}.py", "exec"), namespace)
    module = type("Recorded", (torch.nn.Module,), {"forward": namespace["forward"]})()
    if entry.get("constants"):
        for name, value in torch.load(graphs / entry["constants"], weights_only=True).items():
            setattr(module, name, value)
    return torch.fx.symbolic_trace(module)


def _choose(entries: dict[str, dict[str, Any]], failures: list[dict[str, Any]], inflight: str) -> tuple[str, str | None]:
    """(graph id, recorded description or None for a signal death)."""
    if failures:
        failure = next((f for f in failures if entries[f["graph"]]["stage"] == "aot"), failures[0])
        return _blame_aot(entries, failure["graph"]), failure["description"]
    if inflight:
        return _blame_aot(entries, inflight.split()[0]), None
    raise NothingToMinify("no graph failed in this run (use --accuracy to look for wrong results)")


def _blame_aot(entries: dict[str, dict[str, Any]], graph_id: str) -> str:
    if entries[graph_id]["stage"] == "aot":
        return graph_id
    children = [e["id"] for e in entries.values() if e.get("parent") == graph_id and e.get("aot_kind") != "backward"]
    return children[-1] if children else graph_id


def load_failing(run_dir: Path, *, accuracy: bool = False, tolerance: float = 1e-4) -> RecordedFailure:
    graphs = Path(run_dir) / "graphs"
    index = _read_jsonl(graphs / "index.jsonl")
    if not index:
        raise NothingToMinify(f"no recorded graphs under {graphs}")
    entries = {e["id"]: e for e in index}
    inflight = (graphs / "inflight").read_bytes().decode(errors="replace").strip() if (graphs / "inflight").exists() else ""
    if accuracy:
        graph_id, description = _blame_aot(entries, index[-1]["id"] if index[-1]["stage"] == "dynamo" else index[-1]["parent"] or index[-1]["id"]), None
    else:
        failures = _read_jsonl(graphs / "failures.jsonl")
        graph_id, description = _choose(entries, failures, inflight)
        if description and description.startswith(ACCURACY_TYPE):  # found while recording
            accuracy = True
            tolerance = next((f["tolerance"] for f in failures if f.get("phase") == "accuracy"), tolerance)
    entry = entries[graph_id]
    return RecordedFailure(
        graph_id, case_from_entry(graphs, entry), context_from_entry(entry, accuracy, tolerance),
        _expected(description),
    )


# Exceptions that only wrap the real failure, whose message names no cause; Inductor raises them
# when its parallel compile workers fail (a recording run has them, the isolated workers do not).
_WRAPPERS = ("SubprocException",)


def _expected(description: str | None) -> FailureSignature | None:
    """The recorded signature; None (the worker's first run decides) when it is only a wrapper."""
    if not description or description.startswith(_WRAPPERS):
        return None
    return from_description(description)


def case_from_entry(graphs: Path, entry: dict[str, Any]) -> FxCase:
    gm = load_graph_module(graphs, entry)
    specs = [input_spec_from_dict(d) for d in entry["inputs"]]
    base = make_base(gm, specs)
    if base is None:
        raise NothingToMinify(f"graph {entry['id']} does not run on inputs with its recorded metadata")
    return initial_case(base)


def context_from_entry(entry: dict[str, Any], accuracy: bool, tolerance: float) -> ReproContext:
    backend = entry.get("backend") or {"kind": "named", "name": "inductor", "source": ""}
    header = (
        f"Recorded graph {entry['id']} ({entry['stage']}, compile id {entry.get('compile_id')}); "
        f"torch {torch.__version__}.",
    )
    return ReproContext(
        stage=Stage(entry["stage"]),
        backend=BackendSpec(BackendKind(backend["kind"]), backend["name"], backend.get("source", "")),
        config_lines=tuple(entry.get("config", ())), accuracy=accuracy, tolerance=tolerance, header=header,
    )

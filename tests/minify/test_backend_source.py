"""`capture.child.backend_source`: a user's backend captured with what it needs from its module.

End to end: a real script (scripts/backends_from_module.py) is recorded, and every captured backend
is run standalone in a fresh interpreter (plain torch; the source exec'd on its own) on the same
function: it must fail exactly as the recorded run did. Unit tests (no compile) pin the rules.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pt2doctor.capture.child.backend_source import _literal_source, callable_backend_spec
from pt2doctor.capture.recorded_run import record_script
from pt2doctor.model.minify import BackendKind

SCRIPT = Path(__file__).parent / "scripts" / "backends_from_module.py"

# Runs each captured source in its own namespace of a fresh interpreter, compiles the script's
# `probe` with it, and prints {name: "Type: first line"} of the innermost error.
CHECK = """
import json, sys, torch

def probe(x):
    return torch.tan(torch.sin(x) * 2).relu().sum()

def describe(exc):
    while getattr(exc, "inner_exception", None) is not None:
        exc = exc.inner_exception
    return type(exc).__name__ + ": " + str(exc).splitlines()[0]

results = {}
for name, source in json.load(sys.stdin):
    namespace = {"__name__": "backend_check"}
    try:
        exec(compile(source, "<backend>", "exec"), namespace)
        torch._dynamo.reset()
        torch.compile(probe, backend=namespace[name], fullgraph=True)(torch.randn(4))
        results[name] = "passed"
    except Exception as exc:
        results[name] = describe(exc)
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[dict, str]]:
    """(backend as recorded, the recorded failure's description), one per Dynamo graph."""
    run_dir = tmp_path_factory.mktemp("backends") / "run"
    record_script(SCRIPT, run_dir)
    graphs = [json.loads(line) for line in (run_dir / "graphs" / "index.jsonl").read_text().splitlines()]
    failures = {f["graph"]: f["description"]
                for f in map(json.loads, (run_dir / "graphs" / "failures.jsonl").read_text().splitlines())}
    return [(g["backend"], failures.get(g["id"], "")) for g in graphs if g["stage"] == "dynamo"]


@pytest.fixture(scope="module")
def standalone(recorded) -> dict[str, str]:
    sources = [(b["name"], b["source"]) for b, _ in recorded if b["kind"] == "source"]
    proc = subprocess.run([sys.executable, "-c", CHECK], input=json.dumps(sources), capture_output=True,
                          text=True, timeout=300, cwd="/")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_every_capturable_backend_fails_the_same_way_standalone(recorded, standalone):
    names = [b["name"] for b, _ in recorded]
    assert names == ["globals_backend", "my_aot_backend", "my_compiler", "tally", "locked", "closure_backend"]
    for backend, failure in recorded:
        if backend["kind"] == "source":
            assert standalone[backend["name"]] == failure, backend["source"]


@pytest.mark.slow
def test_module_globals_come_first_in_dependency_order(recorded):
    source = recorded[0][0]["source"]
    order = [source.index(s) for s in ("import torch\n", "UNSUPPORTED = {'cos', 'tan'}\n",
                                         "LIMITS = {'max_nodes': (40, 50)", "def banned", "class MyBackendError",
                                         "def globals_backend")]
    assert order == sorted(order), source
    assert "import torch.nn.functional" not in source and "threading" not in source  # only what it reads


@pytest.mark.slow
def test_aot_autograd_backend_is_rebuilt_under_the_users_name(recorded):
    backend = recorded[1][0]
    assert backend["kind"] == "source" and backend["name"] == "my_aot_backend"
    assert "from torch._dynamo.backends.common import aot_autograd" in backend["source"]
    assert backend["source"].rstrip().endswith(
        "my_aot_backend = aot_autograd(fw_compiler=refuse_sin, bw_compiler=keep)")


@pytest.mark.slow
def test_callable_instances_are_rebuilt_from_their_state(recorded):
    compiler, tally = recorded[2][0]["source"], recorded[3][0]["source"]
    assert compiler.rstrip().endswith("my_compiler = MyCompiler(strict=True)")
    assert tally.rstrip().endswith("tally = _instance(Tally, {'limit': 2, 'seen': []})")


@pytest.mark.slow
def test_uncapturable_state_gives_the_clear_stub(recorded):
    backend = recorded[4][0]
    assert backend["kind"] == "stub"
    assert backend["source"] == (
        "backend 'locked': source unavailable (its attribute 'lock' (type lock) cannot be written as source)")


@pytest.mark.slow
def test_closure_cells_are_captured(recorded):
    source = recorded[5][0]["source"]
    assert "op_name = 'relu'" in source and "import torch.nn.functional as F" in source


# --- unit tests: no compile -------------------------------------------------------------------

HELPERS = '''
import math as m

SCALE = 2.5
CONFIG = {"ops": frozenset({"b", "a"}), "nan": float("nan")}
x = object()  # a module global that a local of the same name must not pull in


def ping(n):
    return pong(n - 1) if n > 0 else SCALE


def pong(n):
    return ping(n)


def uses_local(gm, example_inputs):
    x = CONFIG["ops"]
    return ping(len(x)) and gm.forward


def uses_object(gm, example_inputs):
    return x


def uses_module(gm, example_inputs):
    return m.sqrt(SCALE) and gm.forward
'''


@pytest.fixture(scope="module")
def helpers(tmp_path_factory: pytest.TempPathFactory):
    path = tmp_path_factory.mktemp("helpers") / "backend_helpers.py"
    path.write_text(textwrap.dedent(HELPERS))
    spec = importlib.util.spec_from_file_location("backend_helpers", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["backend_helpers"] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    yield module
    del sys.modules["backend_helpers"]


def test_locals_do_not_pull_in_globals_and_mutual_recursion_terminates(helpers):
    spec = callable_backend_spec(helpers.uses_local)
    assert spec.kind is BackendKind.SOURCE and spec.name == "uses_local"
    assert "x = " not in spec.source.split("def uses_local")[0]
    namespace: dict = {}
    exec(spec.source, namespace)
    assert namespace["ping"](3) == 2.5 and math.isnan(namespace["CONFIG"]["nan"])
    assert "CONFIG = {'ops': frozenset({'a', 'b'}), 'nan': float('nan')}" in spec.source


def test_a_value_that_is_not_source_gives_a_stub_naming_it(helpers):
    spec = callable_backend_spec(helpers.uses_object)
    assert spec.kind is BackendKind.STUB
    assert spec.source == "backend 'uses_object': source unavailable (x (type object) cannot be written as source)"


def test_modules_are_imported_under_their_alias(helpers):
    spec = callable_backend_spec(helpers.uses_module)
    assert spec.source.startswith("import math as m\n")


@pytest.mark.parametrize("value", [1, -2.5, "s", b"b", None, True, (1,), (), [1, (2, "x")], {"k": [1.0]},
                                   {3, 1, 2}, set(), frozenset(), float("inf")])
def test_literals_round_trip(value):
    text = _literal_source(value)
    assert text is not None and eval(text) == value


@pytest.mark.parametrize("value", [object(), [object()], {1: len}, float])
def test_non_literals_are_refused(value):
    assert _literal_source(value) is None

"""Golden output: the terminal summary and session.json of fixed sessions, byte for byte once ids, paths,
times and versions are stripped, and the repro.py of fixed `ReproScript`s (a pure, byte-stable render). A missing or
different golden file fails; after a deliberate change, `python tests/golden/test_golden.py --update` rewrites them
(review the diff before committing).

Sessions: the real traces of `toy_and_recompiles.py` from torch 2.13 (CPU) and torch 2.11 (the CUDA
build on the lent GPU machine): graph breaks, recompiles for a size, an int and a dtype; and a hand-built
failed run (a backend failure whose message starts with Dynamo's
`backend=... raised:` line, with a chain)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from pt2doctor.cli.output import load_session
from pt2doctor.model import SCHEMA, Category, CompileId, ExitInfo, Failure, Session, SourceLoc
from pt2doctor.model.minify import BackendKind, BackendSpec, Stage, TensorSpec
from pt2doctor.reduce.repro import ReproScript, render
from pt2doctor.report.document import build_report, to_json_bytes
from pt2doctor.report.terminal import render_terminal

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
TRACES = ROOT / "tests" / "fixtures" / "traces"


def _failed_run() -> Session:
    message = "backend='my_backend' raised:\nRuntimeError: my_backend cannot compile aten.sin"
    failure = Failure(Category.UNCLASSIFIED, "torch._dynamo.exc.BackendCompilerFailed", message, "/w/train.py", 12,
                      compile_id=CompileId(0, 0), user_frames=(SourceLoc("/w/train.py", 12, "<module>"),),
                      chain=("torch._dynamo.exc.BackendCompilerFailed: backend='my_backend' raised:",
                             "RuntimeError: my_backend cannot compile aten.sin"),
                      traceback='File "/usr/lib/torch/_dynamo/output_graph.py", line 1, in call_user_compiler')
    return Session(schema=SCHEMA, torch_version="2.13.0", command=("/w/train.py",), exit=ExitInfo(code=1),
                   failures=(failure,), cwd="/w", started_at=1.0, wall_s=2.0)


RELU_AOT = ("def forward(self, arg0_1):\n    relu = torch.ops.aten.relu.default(arg0_1);  arg0_1 = None\n"
            "    return (relu,)\n")
FACTORY_AOT = ("def forward(self, x):\n    eye = torch.ops.aten.eye.default(4, dtype=torch.float32, "
               "device=torch.device('cpu'), pin_memory=False)\n"
               "    add = torch.ops.aten.add.Tensor(x, eye);  x = eye = None\n    return (add,)\n")
PICKY = 'def picky(gm, example_inputs):\n    raise NotImplementedError("picky: no sigmoid")\n'
REPROS = {  # what `reduce.repro.render` writes for three kinds of failure: only what each kind needs
    "crash_after_aot": lambda: ReproScript(Stage.AOT, RELU_AOT, (TensorSpec((16, 16), (16, 1)),), config_lines=(
        "import torch._inductor.config", "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'compile_error'")),
    "factory_op_after_aot": lambda: ReproScript(Stage.AOT, FACTORY_AOT, (TensorSpec((4, 4), (4, 1)),)),
    "accuracy_with_the_users_backend": lambda: ReproScript(
        Stage.DYNAMO, "def forward(self, x):\n    sigmoid = torch.sigmoid(x);  x = None\n    return (sigmoid,)\n",
        (TensorSpec((8,), (1,), dtype="float16"),), backend=BackendSpec(BackendKind.SOURCE, "picky", PICKY),
        accuracy=True, header=("pt2doctor minify: a golden example",)),
}
SESSIONS = {"toy_and_recompiles": lambda: load_session(TRACES / "toy_and_recompiles.log"),
            "toy_and_recompiles_torch211": lambda: load_session(TRACES / "toy_and_recompiles_torch211.log"),
            "backend_failure": _failed_run}


def _stable(text: str) -> str:
    """Ids of this checkout, times and versions out: what is left must not change by itself."""
    # the traces name the fixture script where it was when they were recorded, not where this checkout is
    text = re.sub(r"(?:/[^/\s\"'<>]+)*/tests/fixtures/traces/", "<FIXTURES>/", text)
    text = text.replace(str(ROOT), "<ROOT>")
    text = re.sub(r"\b\d+\.\d+(?:e-?\d+)?\b", "<T>", text)  # times, sizes in seconds
    text = re.sub(r"<T>\s+(µs|ms|s)\b", r"<T> \1", text)
    return re.sub(r"[ \t]+\n", "\n", text)


def repro_outputs(name: str) -> dict[str, str]:
    return {f"{name}.repro.py": render(REPROS[name]())}


def outputs(name: str) -> dict[str, str]:
    report = build_report(SESSIONS[name]())
    return {f"{name}.terminal.txt": _stable(render_terminal(report, width=110)),
            f"{name}.session.json": _stable(to_json_bytes(report).decode())}


@pytest.mark.parametrize("name", sorted(SESSIONS) + sorted(REPROS))
def test_matches_golden(name: str) -> None:
    for file, text in (outputs(name) if name in SESSIONS else repro_outputs(name)).items():
        golden = HERE / file
        assert golden.exists(), f"{golden} is missing: run `python {__file__} --update`"
        assert text == golden.read_text(), f"{file} changed; if deliberate: python {__file__} --update"


if __name__ == "__main__" and sys.argv[1:] == ["--update"]:
    for session_name in [*SESSIONS, *REPROS]:
        written = outputs(session_name) if session_name in SESSIONS else repro_outputs(session_name)
        for file_name, content in written.items():
            (HERE / file_name).write_text(content)
            print(f"wrote {HERE / file_name}")

"""The corpus headers parse and use the vocabulary bench/realbugs.py scores against (no compile runs)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_BENCH = Path(__file__).resolve().parents[2] / "bench" / "realbugs.py"
_spec = importlib.util.spec_from_file_location("realbugs_bench", _BENCH)
realbugs = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = realbugs  # dataclasses look their module up while the class is built
_spec.loader.exec_module(realbugs)

KINDS = {"crash", "wrong_result", "segfault"}
CATEGORIES = {"backend_failure", "kernel_failure", "accuracy", "dynamo_internal", "runtime_crash", "graph_break"}
STAGES = {"dynamo", "aot_autograd", "decomp_partition", "inductor", "backend"}


@pytest.mark.parametrize("path", realbugs.corpus(""), ids=lambda p: p.stem)
def test_header_fields(path):
    header = realbugs.parse_header(path)
    assert header.issue.startswith("https://github.com/pytorch/pytorch/")
    assert (header.kind, header.category, header.stage) in {(k, c, s) for k in KINDS for c in CATEGORIES for s in STAGES}
    assert header.fails_on.startswith("torch 2.13.0+cpu: ")


@pytest.mark.parametrize("path", realbugs.corpus("", realbugs.CORPUS / "cuda"), ids=lambda p: p.stem)
def test_cuda_header_fields(path):
    header = realbugs.parse_header(path)
    assert header.issue.startswith("https://github.com/pytorch/pytorch/")
    assert (header.kind, header.category, header.stage) in {(k, c, s) for k in KINDS for c in CATEGORIES for s in STAGES}
    assert header.fails_on.startswith("torch 2.11.0+cu")


def test_corpus_has_the_minimum_size():
    assert len(realbugs.corpus("")) >= 25


@pytest.mark.parametrize(("culprit", "found", "right"), [
    ("aten.bartlett_window", ["bartlett_window.default"], True),
    ("aten.div.Tensor_mode, aten.floor_divide", ["aten.div.Tensor_mode"], True),
    ("torch.relu", ["aten.relu.default"], True),
    ("aten.min.dim", ["aten.max.dim"], False),
    ("a guard on a bound method's __code__", ["aten.mul.Tensor"], False),
])
def test_culprit_ops_compare_by_op_name(culprit, found, right):
    header = realbugs.Header("x", "https://github.com/pytorch/pytorch/issues/1", "t", "crash", "accuracy", "inductor",
                             culprit, "torch 2.13.0+cpu: x")
    assert realbugs.culprit_right(header, found) is right


def test_a_missing_field_is_an_error(tmp_path):
    script = tmp_path / "bad.py"
    script.write_text('"""\nissue: https://github.com/pytorch/pytorch/issues/1\ntitle: t\n"""\n')
    with pytest.raises(ValueError, match="kind"):
        realbugs.parse_header(script)

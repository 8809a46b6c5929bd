"""The Python APIs: explain parity with torch, watch, CompileProfiler as the docs use it, lazy import."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
import torch._dynamo

import pt2doctor


def plain(x):
    return x.sin() + x.cos()


def with_print(x):
    x = x * 2
    print("inside")
    return x + 1


def with_item_and_branch(x):
    if x.sum() > 0:
        x = x + 1
    return x * x.sum().item()


def with_nonzero(x):
    y = x.relu()
    return y.nonzero().float().sum() + y


@pytest.mark.parametrize("fn", [plain, with_print, with_item_and_branch, with_nonzero])
def test_explain_counts_equal_torch_explain(fn) -> None:
    x = torch.randn(8)
    torch._dynamo.reset()
    ours = pt2doctor.explain(fn)(x)
    torch._dynamo.reset()
    theirs = torch._dynamo.explain(fn)(x)
    assert (ours.graph_count, ours.graph_break_count, ours.op_count) == \
        (theirs.graph_count, theirs.graph_break_count, theirs.op_count)
    assert [len(ops) for ops in ours.ops_per_graph] == [len(ops) for ops in theirs.ops_per_graph]
    assert [b.reason for b in ours.break_reasons] == [b.reason for b in theirs.break_reasons]
    assert len(ours.out_guards) == len(theirs.out_guards)


def test_explain_adds_cookbook_hints_to_the_printout() -> None:
    torch._dynamo.reset()
    out = pt2doctor.explain(with_item_and_branch)(torch.randn(8))
    text = str(out)
    assert "Graph Break Count:" in text and "Hint (pt2doctor):" in text and "torch.where" in text


def test_watch_yields_the_session_after_the_block() -> None:
    torch._dynamo.reset()

    def f(x, n):
        return x * n

    with pt2doctor.watch() as w:
        assert w.session is None
        compiled = torch.compile(f, backend="eager")
        compiled(torch.randn(4), 2)
        compiled(torch.randn(4), 3)
    assert w.session is not None and w.session.compiles
    (recompile,) = w.session.recompiles
    assert recompile.guard_failures[0].subject == "n"


def test_watch_removes_its_handler_even_when_the_block_raises() -> None:
    from pt2doctor.capture import torch_compat

    before = list(torch_compat.trace_logger().handlers)
    with pytest.raises(RuntimeError), pt2doctor.watch():
        raise RuntimeError("boom")
    assert torch_compat.trace_logger().handlers == before


class MyModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        print("forward")
        return self.fc(x).relu()


def test_compile_profiler_as_the_docs_use_it() -> None:
    torch._dynamo.reset()
    my_model = MyModel()
    with pt2doctor.CompileProfiler() as prof:
        profiler_model = torch.compile(my_model, backend=prof)
        for batch in (2, 3, 4):
            profiler_model(torch.randn(batch, 4))
        profiler_model(torch.randn(4, 4, dtype=torch.float64).float().t())
    report = prof.report()
    assert prof.frame_count >= 2 and prof.op_count > 0
    assert "Graph Breaks" in report and "print" in report
    assert "size at dim 0 changed 2 -> 3" in report and "became non-contiguous" in report
    assert "recompile_limit=1" in report
    assert prof.session is not None and len(prof.session.recompiles) >= 2


def test_import_pt2doctor_does_not_import_torch() -> None:
    code = "import sys, pt2doctor; assert 'torch' not in sys.modules; print(sorted(pt2doctor.__all__))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "CompileProfiler" in out and "explain" in out and "watch" in out

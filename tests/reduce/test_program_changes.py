"""A stale result's culprit: the statement between two calls of the compiled code that writes state the
compiled code reads (no guard caught it), found in a program's AST; on the real Dynamo bugs and their
reduced programs."""

from __future__ import annotations

import textwrap
from pathlib import Path

from pt2doctor.reduce.program_changes import unguarded_changes

REALBUGS = Path(__file__).parents[1] / "realbugs"


def test_a_replaced_code_object_of_an_inlined_method_is_the_change() -> None:
    # pytorch#197860: the compiled lambda inlines `model.m`; `Model.m.__code__` is replaced between the calls
    (change,) = unguarded_changes((REALBUGS / "bound_method_code_stale.py").read_text())
    assert change.path == "Model.m.__code__" and change.statement == "Model.m.__code__ = second.__code__"


def test_object_setattr_on_a_module_is_a_write_of_its_instance_dict() -> None:
    # pytorch#197859: `object.__setattr__` bypasses nn.Module.__setattr__, shadowing `self.sub` in `__dict__`
    (change,) = unguarded_changes((REALBUGS / "module_dict_shadowing_stale.py").read_text())
    assert change.path == "model.__dict__['sub']" and change.statement.startswith("object.__setattr__(model, 'sub'")


def test_new_inputs_and_state_the_compiled_code_never_reads_are_no_change() -> None:
    source = textwrap.dedent("""
        import torch
        scale = 2.0
        other = {}
        def f(x):
            return x * scale
        compiled = torch.compile(f)
        x = torch.ones(3)
        compiled(x)
        x = torch.zeros(3)
        other["k"] = 1
        scale = 3.0
        compiled(x)
        late = 1
    """)
    assert [c.path for c in unguarded_changes(source)] == ["scale"]  # a global it reads, not its argument


def test_one_compiled_call_has_no_between() -> None:
    source = "import torch\nf = torch.compile(lambda x: x + 1)\nf.attr = 1\nf(torch.ones(1))\n"
    assert unguarded_changes(source) == ()

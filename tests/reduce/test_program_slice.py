"""The program reducer's first cut (`reduce.program_slice`): what the failing lines can depend on, as written."""

from __future__ import annotations

from pt2doctor.reduce.program_slice import relevant_part

PROGRAM = '''\
import os
import torch
import numpy as np

torch.manual_seed(0)
unused = np.arange(3)  # feeds nothing into the failure
log = open(os.devnull, "w")


def helper(t):
    return t.cos()


@torch.compile(backend="eager")
def f(x):
    return helper(x) + SCALE


SCALE = 2.0
model = torch.nn.Linear(3, 3)
model.eval()
print("starting", file=log)
x = torch.randn(3)
out = f(x)
assert out.sum() > 100, "wrong"
'''


def test_the_cut_keeps_the_failing_line_what_compiles_and_what_feeds_them_as_written():
    cut = relevant_part(PROGRAM, [25])
    assert cut is not None
    kept = cut.splitlines()
    assert 'assert out.sum() > 100, "wrong"' in kept and "out = f(x)" in kept and "x = torch.randn(3)" in kept
    assert "@torch.compile(backend=\"eager\")" in kept and "    return helper(x) + SCALE" in kept  # decorators kept
    assert "def helper(t):" in kept and "SCALE = 2.0" in kept and "import torch" in kept
    assert "torch.manual_seed(0)" in kept  # the RNG's seed: the values the failure shows on
    for gone in ("unused = np.arange(3)  # feeds nothing into the failure", "import numpy as np",
                 'print("starting", file=log)', "import os", "model.eval()"):
        assert gone not in kept


def test_an_object_changed_in_place_is_kept_with_what_reads_it():
    program = "import torch\nm = torch.nn.Linear(2, 2)\nm.eval()\nm.weight.data.zero_()\nprint(0)\n" \
              "c = torch.compile(m)\nassert c(torch.ones(2)).sum() == 1\n"
    cut = relevant_part(program, [7])
    assert cut is not None and "m.eval()\n" in cut and "m.weight.data.zero_()\n" in cut and "print(0)" not in cut


def test_nothing_to_leave_out_is_no_candidate():
    assert relevant_part("import torch\nx = torch.compile(abs)(torch.ones(1))\n", [2]) is None
    assert relevant_part("def f(:\n", [1]) is None

"""Compiler settings as workarounds, searched on the minimal graph, not guessed (issue #39, point 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pt2doctor.capture import torch_compat
from pt2doctor.diagnose.setting_search import applicable, configured
from pt2doctor.model.compiler_settings import FUNCTORCH, SETTINGS, for_subsystem
from pt2doctor.model.diagnosis import FailingStage

REALBUGS = Path(__file__).parents[1] / "realbugs"


def test_every_row_is_a_key_of_the_installed_torch_and_each_line_is_one_assignment():
    """The table is read against the installed torch: a key it lacks would never be tried, silently."""
    missing = [s.name for s in SETTINGS if torch_compat.config_value(s.module, s.key) is torch_compat.CONFIG_MISSING]
    assert missing == []
    assert len({s.line for s in SETTINGS}) == len(SETTINGS)
    for s in SETTINGS:  # the line a patch writes parses (run, it would change this process's config)
        compile(f"import {s.module}\n{s.line}\n", "patch.py", "exec")


def test_rows_that_cannot_change_the_graph_are_not_tried():
    rows = {s.key for s in applicable(FailingStage.INDUCTOR, ("aten.add.Tensor", "aten.relu.default"), "cpu")}
    assert "cpp.simdlen" in rows and "emulate_precision_casts" in rows
    assert not {"online_softmax", "optimize_scatter_upon_const_tensor", "split_reductions"} & rows  # no such op
    assert not {k for k in rows if k.startswith("triton.")}  # another device's
    assert "max_autotune" not in rows  # the installed torch's default already
    reduction = {s.key for s in applicable(FailingStage.INDUCTOR, ("aten.sum.dim_IntList",), "cuda")}
    assert {"split_reductions", "triton.persistent_reductions"} <= reduction and "cpp.simdlen" not in reduction
    aot = applicable(FailingStage.DECOMP_PARTITION, ("aten.add.Tensor",), "cpu")
    assert aot and all(s.module == FUNCTORCH for s in aot)
    # aot_eager_decomp_partition decomposes with Inductor's table, which `fallback_random` changes: a random op's
    # wrong result at that stage (pytorch#141557, a thread's setting) has it tried; AOTAutograd's alone does not
    random = ("aten.native_dropout.default",)
    assert "fallback_random" in {s.key for s in applicable(FailingStage.DECOMP_PARTITION, random, "cpu")}
    assert "fallback_random" not in {s.key for s in applicable(FailingStage.AOT_AUTOGRAD, random, "cpu")}
    # the same random op after AOTAutograd decomposed it for Inductor: only its seeds left in the minimal graph
    assert "fallback_random" in {s.key for s in applicable(FailingStage.INDUCTOR, ("prims.inductor_seeds.default",),
                                                           "cpu")}
    assert "fallback_random" not in {s.key for s in applicable(FailingStage.INDUCTOR, ("aten.expand.default",), "cpu")}
    # how Dynamo specializes inputs decides the graphs Inductor gets: tried on a reduced program past Dynamo, last
    # (pytorch#194976: a float made dynamic, `specialize_float = True` in its thread); a graph's inputs are fixed
    clamp = ("aten.clamp.default",)
    on_program = [s.key for s in applicable(FailingStage.INDUCTOR, clamp, "cpu", program=True)]
    assert on_program[-3:] == ["specialize_float", "specialize_int", "automatic_dynamic_shapes"]
    assert "specialize_float" not in {s.key for s in applicable(FailingStage.INDUCTOR, clamp, "cpu")}
    assert "trace_numpy" not in on_program  # Dynamo's other rows: its own failures only


def test_what_the_bisector_blames_is_turned_off_by_a_row_of_the_same_table():
    assert for_subsystem("inductor_fallback_random").line == "torch._inductor.config.fallback_random = True"
    assert for_subsystem("post_grad_passes") is for_subsystem("joint_graph_passes")
    assert for_subsystem("lowerings") is None  # no setting turns one lowering off alone


def test_a_real_vectorisation_bug_gets_the_setting_that_avoids_it(diagnosed):
    """pytorch#171493 on CPU: Inductor's vectorised atomic_add store asserts. Vectorisation off (`cpp.simdlen = 1`)
    avoids it with every graph compiled; the backend for everything was the hand-over before."""
    run, d = diagnosed(REALBUGS / "index_add_atomic_add_vec_store.py")
    assert d["stage"] == "inductor", d["headline"]
    search = d["settings"]
    assert search is not None and "torch._inductor.config.cpp.simdlen = 1" in [t["setting"] for t in search["trials"]
                                                                              if t["outcome"] == "pass"]
    handed = [w for w in d["workarounds"] if w["verified"]][-1]
    assert handed["kind"] == "config" and "cpp.simdlen = 1" in handed["patch"], d["workarounds"]
    assert handed["graphs_kept_compiled"] >= 1
    assert any(r["function"].startswith("torch._inductor.config.cpp.") and r["file"] == "torch/_inductor/config.py"
               for r in d["where_to_look"]), d["where_to_look"]
    assert any(s["step"] == "settings" and s["graph"] == search["runs"] > 0 for s in d["runs"]["steps"])
    assert "cpp.simdlen = 1" in json.dumps(d["next_steps"])


# The reduced program pt2doctor wrote for pytorch#182131 (fp16_cast_before_add_elided.py): no graph verifies (the
# accuracy rule, against fp64, finds compiled closer than eager), the script's exact check fails.
FP16_PROGRAM = '''\
import torch
x = torch.arange(24).reshape(2, 3, 4) / 5
c = 0

def f(x, c):
    z = x
    y = z.to() + x.to(torch.float16)
    return y
eager = f(x, c)
compiled = torch.compile(f)(x, c)
torch.testing.assert_close(compiled[0], eager[0], rtol=0, atol=0)
'''


def test_where_no_graph_verified_the_settings_are_searched_on_the_reduced_program(tmp_path):
    """Issue #39: the backend for everything was handed over on program repros. The table is tried on the reduced
    program in warm workers, as its checks ran: the thread's setting (emulate_precision_casts) removes the failure,
    the others, set together in the same round, do not (the judge tells them apart: the program still fails without
    it)."""
    from pt2doctor.diagnose.found import Found
    from pt2doctor.diagnose.setting_search import program_applies, search_on_program
    from pt2doctor.model import Category
    from pt2doctor.model.diagnosis import ProgramRepro
    from pt2doctor.processes.pool import WorkerPool

    repro = tmp_path / "repro.py"
    repro.write_text(FP16_PROGRAM)
    program = ProgramRepro(str(repro), "AssertionError: Tensor-likes are not equal!", None, "fallback", 25, 10, 1, 0.3,
                           1.0, verified=True, culprit_ops=("z.to", "x.to"))
    found = Found(command=("fp16.py",), category=Category.ACCURACY, stage=FailingStage.INDUCTOR, program=program)
    assert program_applies(found)
    with WorkerPool(2, 120.0) as pool:
        search = search_on_program(pool, found, tmp_path / "fp16.py")
    assert search is not None and search.on == "the reduced program"
    assert [s.key for s in search.passed_settings] == ["emulate_precision_casts"], search.trials
    assert any(t.outcome == "fail" for t in search.trials), search.trials
    # rows set several at once where the failure stays: fewer runs than rows, the others settled together
    assert search.runs < len(search.trials) and any(t.together > 1 for t in search.trials), search
    assert "tried on the reduced program" in search.describe() and "only set with others at once" in search.describe()
    dynamo = applicable(FailingStage.DYNAMO, program.culprit_ops, "cpu")
    assert dynamo == [] or all(s.module == "torch._dynamo.config" for s in dynamo)  # no Inductor row at Dynamo's


NUMPY_PROGRAM = """import numpy as np
import torch

i8 = np.array([-128, -100, -3, 0, 5, 100, 127], dtype=np.int8)

def f(a):
    return np.cumsum(a)

e = f(i8)
c = torch.compile(f, backend="eager")(i8)
assert np.array_equal(e, c) and e.dtype == c.dtype, (e.dtype, c.dtype)
"""


def test_a_dynamo_failure_gets_dynamos_setting_searched_on_its_reduced_program(tmp_path):
    """numpy_cumsum_int8_dtype (pytorch#157079's shape): a Dynamo-stage wrong result was handed "compile nothing at
    this site". Dynamo's rows are searched on the reduced program: `trace_numpy = False` removes it (NumPy runs as
    NumPy), the guard rows are not tried (the program writes no dunder, no module)."""
    pytest.importorskip("numpy")
    from pt2doctor.diagnose.found import Found
    from pt2doctor.diagnose.setting_search import program_applies, search_on_program
    from pt2doctor.model import Category
    from pt2doctor.model.diagnosis import ProgramRepro
    from pt2doctor.processes.pool import WorkerPool

    repro = tmp_path / "repro.py"
    repro.write_text(NUMPY_PROGRAM)
    program = ProgramRepro(str(repro), "AssertionError: (dtype('int64'), dtype('int8'))", "eager", "dynamo", 14, 9,
                           1, 0.3, 1.0, verified=True, culprit_ops=("numpy.cumsum",), backend_in_source=True)
    found = Found(command=("np.py",), category=Category.ACCURACY, stage=FailingStage.DYNAMO, program=program)
    assert program_applies(found)
    with WorkerPool(2, 120.0) as pool:
        search = search_on_program(pool, found, tmp_path / "np.py")
    assert search is not None, found.notes
    assert [s.key for s in search.passed_settings] == ["trace_numpy"], search.trials
    assert not any("dunder" in t.touches or "dict" in t.touches for t in search.trials)


def _rounds(removes, rows: int = 20, jobs: int = 2):
    """Drive one lane of the search over the table's first `rows` rows, the failure gone where `removes(rows set)`
    says so (the search's own decisions, not the compiler's: the real runs are the tests above and below)."""
    from pt2doctor.diagnose.setting_search import _Lane
    from pt2doctor.processes.pool import RunResult
    from pt2doctor.reduce.core import Outcome

    lane, rounds, runs = _Lane(("", None), list(SETTINGS[:rows])), 0, 0  # type: ignore[arg-type]
    while lane.pending and not lane.passed:
        asks = lane.asks(jobs)
        rounds, runs = rounds + 1, runs + len(asks)
        lane.learn([(ask, Outcome.PASSES if removes({s.key for s in ask}) else Outcome.FAILS_SAME,
                     RunResult("ok", "")) for ask in asks])
        assert rounds < rows + 2, "the search does not end"
    return lane, rounds, runs


def test_a_search_that_finds_nothing_takes_one_round_not_one_run_a_row():
    lane, rounds, runs = _rounds(lambda keys: False)
    assert (rounds, runs) == (1, 2) and not lane.passed and not lane.pending
    assert lane.trials[0].together == 1 and {t.together for t in lane.trials[1:]} == {19}


@pytest.mark.parametrize("at", [0, 1, 2, 7, 18, 19])
@pytest.mark.parametrize("jobs", [1, 2, 4])
def test_one_row_that_removes_the_failure_is_found_alone_in_a_few_rounds(at, jobs):
    """The row is found as the narrowest that removes it, confirmed alone, in about log(rows) rounds where one run a
    row took rows/jobs; the rows before it are settled, none after it passes (a run of them failed, or not tried)."""
    key = SETTINGS[at].key
    lane, rounds, _ = _rounds(lambda keys: key in keys, jobs=jobs)
    passed = [t for t in lane.trials if t.outcome == "pass"]
    assert [t.setting for t in passed] == [SETTINGS[at].line] and passed[0].together == 1
    assert {s.line for s in SETTINGS[:at + 1]} <= {t.setting for t in lane.trials}
    assert rounds <= {1: 7, 2: 6, 4: 4}[jobs] and (at > 1 or jobs == 1 or rounds <= 2), rounds


def test_two_rows_that_remove_it_only_together_are_not_claimed_and_the_search_ends():
    """No row alone removes it: nothing passes, every row is settled, the search ends."""
    both = {SETTINGS[5].key, SETTINGS[6].key}
    for jobs in (1, 2, 4):
        lane, _, _ = _rounds(lambda keys: both <= keys, jobs=jobs)
        assert not lane.passed and not lane.pending


class _Judged:
    """A pool standing in for the workers: a run fails as its subject does unless it sets one of `removing` and
    none of `masking`."""

    def __init__(self, removing: set[str], masking: frozenset[str] = frozenset(), jobs: int = 2) -> None:
        self.removing, self.masking, self.jobs, self.asked = removing, masking, jobs, []

    def run(self, texts):
        from pt2doctor.processes.pool import RunResult

        self.asked.append(len(texts))
        return [RunResult("ok") if any(line in text for line in self.removing)
                and not any(line in text for line in self.masking) else
                RunResult("failed", "RuntimeError: the subject's failure") for text in texts]


def test_a_row_removing_it_in_one_subject_does_not_hide_a_narrower_one_in_the_other():
    """Rows acting before lowering run on the Dynamo graph, the others on the minimal graph: each lane searches its
    own, the workers shared; where a wider row removes the failure first, the narrower rows of the other lane are
    still settled, and the narrowest that removes it is handed over first."""
    from pt2doctor.diagnose.setting_search import _search
    from pt2doctor.model.signature import from_description

    target = from_description("RuntimeError: the subject's failure")
    lowering = [s for s in SETTINGS if s.phase == "lowering" and "cpu" in s.devices][:1]
    earlier = [s for s in SETTINGS if s.phase != "lowering" and s.module != "torch._dynamo.config"][:6]
    narrow, wide = earlier[1], lowering[0]  # wide removes it in round 1, alone in its lane; narrow later
    assert SETTINGS.index(narrow) < SETTINGS.index(wide) or pytest.skip("the table's order changed")
    pool = _Judged({narrow.line, wide.line})
    rows = ([(row, ("import torch\nminimal = 1\n", target)) for row in lowering]
            + [(row, ("import torch\ndynamo = 1\n", target)) for row in earlier])
    rows.sort(key=lambda pair: SETTINGS.index(pair[0]))
    search = _search(pool, rows, "repro.py", "the minimal graph", configured)  # type: ignore[arg-type]
    assert [s.line for s in search.passed_settings] == [narrow.line, wide.line], search.trials
    wider = {s.line for s in earlier if SETTINGS.index(s) > SETTINGS.index(wide)}
    assert not wider & {t.setting for t in search.trials}  # rows wider than a row that removes it: no run
    assert search.untried == 0 and search.runs == sum(pool.asked) and max(pool.asked) <= pool.jobs


def test_rows_of_one_family_are_never_set_in_one_run():
    """uint8_abs_cat_sum (measured in fresh interpreters): the C++ tiling heuristics off removes the wrong result,
    and with the vectorised loop tail or all vectorisation off as well it comes back; all rows set at once hid the
    fix. Rows of one family go to separate runs, so the fix is found as it was one run a row."""
    from pt2doctor.diagnose.setting_search import _search
    from pt2doctor.model.signature import from_description

    by = {s.key: s for s in SETTINGS}
    family = [by["cpp.enable_loop_tail_vec"], by["cpp.enable_tiling_heuristics"], by["cpp.simdlen"]]
    assert len({s.family for s in family}) == 1 and family[0].family
    rows = [s for s in SETTINGS if s.phase == "lowering" and "cpu" in s.devices]
    target = from_description("RuntimeError: the subject's failure")
    pool = _Judged({family[1].line}, masking=frozenset({family[0].line, family[2].line}))
    search = _search(pool, [(row, ("import torch\n", target)) for row in rows], "repro.py", "the minimal graph",
                     configured)  # type: ignore[arg-type]
    assert [s.key for s in search.passed_settings] == ["cpp.enable_tiling_heuristics"], search.trials


def test_the_search_finds_as_many_rows_as_the_workarounds_try_on_the_script():
    """rand_like_where_eval_rng_mismatch: `emulate_precision_casts` (narrowest) and `fallback_random` both remove the
    failure from the minimal graph, and only the second from the program; a search that stopped at the first handed
    over the backend for everything. The two narrowest rows that remove it are found, none wider is run after them."""
    from pt2doctor.diagnose.setting_search import _search
    from pt2doctor.model.compiler_settings import TRIED_ON_THE_SCRIPT
    from pt2doctor.model.signature import from_description

    rows = [s for s in SETTINGS if s.phase == "lowering" and "cpu" in s.devices]
    first, second, third = rows[0], rows[len(rows) // 2], rows[-1]
    target = from_description("RuntimeError: the subject's failure")
    pool = _Judged({first.line, second.line, third.line})
    search = _search(pool, [(row, ("import torch\n", target)) for row in rows], "repro.py", "the minimal graph",
                     configured)  # type: ignore[arg-type]
    assert TRIED_ON_THE_SCRIPT == 2 and search.passed_settings == (first, second), search.trials
    assert third.line not in {t.setting for t in search.trials}

"""The program reducer (`reduce.program`): its oracle on real torch.compile runs, the culprit callables it
names from a reduced program, and the backend it writes into `torch.compile` calls."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest

from pt2doctor.processes.pool import WorkerPool
from pt2doctor.reduce import program
from pt2doctor.reduce.core import Outcome
from pt2doctor.reduce.program import CannotReduce, ProgramJob, ProgramOracle, passes_with, pin_backend, reduce_program
from pt2doctor.reduce.program_check import ProgramReduction, code_lines
from pt2doctor.reduce.program_culprits import compiled_calls
from pt2doctor.reduce.program_harness import ProgramRun, harness_text

# pytorch#197896: a closure list appended to from a local class's method stays empty after the compiled call
SCRIPT = Path(__file__).parents[1] / "realbugs" / "closure_list_mutation_in_local_class.py"
SOURCE = SCRIPT.read_text()


class Lines:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def status(self, text: str) -> None:
        self.lines.append(text)


def _job(tmp_path: Path, budget_s: float = 60.0) -> ProgramJob:
    return ProgramJob(SCRIPT, (), "AssertionError: ", "eager", tmp_path, budget_s, 60.0, type_only=True)


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(1, 60.0) as warm:
        yield warm


def test_the_oracle_keeps_the_failure_and_rejects_what_fails_uncompiled_or_passes(pool, tmp_path):
    oracle = ProgramOracle(pool, _job(tmp_path))
    assert oracle(SOURCE) is Outcome.FAILS_SAME
    uncompiled = SOURCE.replace('torch.compile(fn, backend="eager", fullgraph=True)', "fn")
    assert oracle(uncompiled) is Outcome.PASSES  # the compile call deleted: nothing is wrong any more
    always = SOURCE.replace("assert e == len(state)", "assert e == len(state) + 1")
    assert oracle(always) is Outcome.FAILS_OTHER and oracle.failed_uncompiled == 1  # fails with compilation off too
    assert oracle(SOURCE.replace("assert e == len(state)", "")) is Outcome.PASSES
    crash = SOURCE.replace("assert e == len(state)", "raise ValueError('other')")
    assert oracle(crash) is Outcome.FAILS_OTHER  # another exception type is another failure


def test_a_program_is_checked_once(pool, tmp_path):
    reduction = ProgramReduction(ProgramOracle(pool, _job(tmp_path)), SOURCE, 60.0, Lines())
    assert reduction(SOURCE) and reduction(SOURCE)  # the second answer is the cache's
    assert reduction.checks == 1


def test_a_reused_server_forgets_what_the_last_program_changed(tmp_path):
    """The GPU way reuses interpreters: the compilation-off check's `set_stance("force_eager")`, its
    `torch.compile` patch, cwd and `__main__` must not reach the next candidate (seen on an H100: every
    compiled check after the first passed, so no program could be reduced)."""
    with WorkerPool(1, 60.0, servers=True) as servers:
        oracle = ProgramOracle(servers, _job(tmp_path))
        assert [oracle(SOURCE) for _ in range(3)] == [Outcome.FAILS_SAME] * 3


def test_a_reused_server_forgets_the_export_overrides_of_the_last_program(tmp_path):
    """The export path's checks replace torch.export.export (its module run first; a stand-in with export
    off): seen on an H100, every check after the first ran the previous check's stand-in and passed."""
    from pt2doctor.model.export import ExportStep

    script = Path(__file__).parents[1] / "export" / "scripts" / "global_specialized.py"
    job = ProgramJob(script, (), "AssertionError: Tensor-likes are not close!", None, tmp_path, 60.0, 120.0,
                     "export", True, 19, ExportStep.NON_STRICT_TRACE)
    with WorkerPool(1, 120.0, servers=True) as servers:
        oracle = ProgramOracle(servers, job)
        assert [oracle(script.read_text()) for _ in range(3)] == [Outcome.FAILS_SAME] * 3


@pytest.mark.slow
def test_the_reduced_program_keeps_the_culprit_and_verifies_both_ways(tmp_path):
    lines = Lines()
    result = reduce_program(_job(tmp_path, 90.0), lines)
    repro = Path(result.repro_path).read_text()
    assert result.verified and result.lines_after < result.lines_before == code_lines(SOURCE)
    assert "state.append" in repro and "backend='eager'" in repro and result.backend_in_source
    assert result.culprit_ops == ("list.append",) and "pt2doctor" not in repro.split('"""', 2)[2]
    assert lines.lines[-1].startswith(f"program reduction: {result.checks} checks, {result.lines_before} lines -> ")


def test_a_wrong_result_is_the_scripts_own_check_not_an_assertion_inside_the_compiler():
    harness: dict[str, object] = {}
    exec(harness_text("", ProgramRun("user.py", "/", (), type_only=True)), harness)
    describe = harness["describe_failure"]
    try:
        raise AssertionError("values 1 2")
    except AssertionError as exc:
        assert describe(exc) == "AssertionError"  # type: ignore[operator]
    try:
        exec(compile("raise AssertionError('bad layout')", "/site-packages/torch/_inductor/lowering.py", "exec"))
    except AssertionError as exc:
        assert describe(exc) == "AssertionError: bad layout"  # type: ignore[operator]


def test_culprits_are_the_callables_of_the_compiled_code_only():
    source = """
import numpy as np
import torch
def helper(x):
    return np.cumsum(x)
def fn(x):
    items = []
    items.append(1)
    return torch.sin(helper(x))
print(len([1]))
torch.compile(fn)(torch.ones(1))
torch._dynamo.optimize("eager")(helper)
"""
    assert compiled_calls(source) == ("numpy.cumsum", "list.append", "torch.sin")  # helper is compiled first


def test_the_operators_of_the_compiled_code_follow_its_calls_as_dynamo_names_them():
    """saved_input_view_inplace_check_lost's reduced program compiles `x @ w` alone: no call, so no culprit and no call
    to keep out (the backend for every compile was its workaround). Operators come after the calls, within the limit;
    the script's lines that use one are where a workaround keeps it out."""
    source = "import torch\ndef f(x, w):\n    return torch.relu(x @ w) * -x\ny = 2 * 3\ntorch.compile(f)(x, w)\n"
    assert compiled_calls(source) == ("torch.relu", "operator.mul", "operator.matmul", "operator.neg")
    from pt2doctor.analysis.workaround_edits import calls_named

    assert calls_named(source, ["operator.mul", "torch.relu"]) == [("operator.mul", 3), ("operator.mul", 4),
                                                                   ("torch.relu", 3)]


def test_culprits_follow_decorators_transforms_and_module_forward():
    source = """
import torch
class Sq(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return torch.square(x)
class M(torch.nn.Module):
    def forward(self, x):
        return Sq.apply(x)
@torch.compile(fullgraph=True)
def g(x):
    return torch.func.grad(lambda y: y.sum())(x)
m = M()
torch.compile(m)
"""
    assert compiled_calls(source) == ("torch.func.grad", "y.sum", "torch.autograd.Function.apply", "torch.square")


def test_culprits_of_an_export_are_the_calls_in_the_module_it_traces():
    source = """
import torch
from torch.export import export
def branch(x):
    torch.tensor(0)
    return x.clone()
class M(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.any(), branch, branch, (x,))
m = M().eval().to("cpu")
ep = export(m, (torch.ones(1),))
ep.run_decompositions()
"""
    assert compiled_calls(source) == ("torch.cond", "x.any", "torch.tensor", "x.clone")
    # a module torch made: what made it
    remade = "import torch\nu = torch.export.unflatten(ep)\ntorch.export.export(u, (x,))\n"
    assert compiled_calls(remade) == ("torch.export.unflatten",)


def test_the_backend_is_written_into_every_compile_call():
    source = "import torch\n@torch.compile\ndef f(x):\n    return x\ng = torch.compile(f, backend='inductor')\n"
    pinned = pin_backend(source, "eager")
    assert pinned is not None and pinned.count("backend='eager'") == 2 and "inductor" not in pinned
    ast.parse(pinned)
    assert pin_backend("import torch\nopt = torch._dynamo.optimize('eager')\n", "eager") is None


def test_a_wrong_results_check_and_the_seeds_are_kept_as_written():
    """Shrinking `rtol=1e-4` to `rtol=0` keeps the failure's type and passes with compilation off, yet
    claims a bitwise difference (seen on pytorch#185509's script): such a candidate is refused unrun."""
    from pt2doctor.reduce.program_keep import keeps, kept_statements

    source = ("import torch\ntorch.manual_seed(0)\nx = torch.randn(4)\ny = torch.compile(torch.sin)(x)\n"
              "print(y)\ntorch.testing.assert_close(y, torch.sin(x), rtol=1e-4, atol=1e-4)\n")
    kept = kept_statements(source, check_line=6)
    assert len(kept) == 2  # the check and the seed
    assert keeps(source.replace("print(y)\n", ""), kept)
    assert not keeps(source.replace("rtol=1e-4", "rtol=0"), kept)
    assert not keeps(source.replace("torch.manual_seed(0)\n", ""), kept)
    assert kept_statements(source, check_line=None) < kept  # a crash keeps only the seed


def test_a_seeded_generator_is_kept_and_a_program_that_compiles_nothing_is_refused():
    """pytorch#196437's script seeds `random.Random(0)`: a reduction dropped the seed and the compile call,
    and its randint check failed compiled and passed uncompiled by chance (a repro that did not verify)."""
    from pt2doctor.reduce.program_keep import keeps, kept_statements

    source = ("import random\nimport torch\nrng = random.Random(0)\ng = torch.Generator().manual_seed(1)\n"
              "c = torch.compile(lambda x: x + rng.randint(1, 9))(torch.zeros(2))\nassert c.sum() > 0\n")
    kept = kept_statements(source, check_line=6)
    assert len(kept) == 3  # the check and both seeded generators
    assert not keeps(source.replace("random.Random(0)", "random.Random()"), kept, compiles=True)
    uncompiled = source.replace("torch.compile(lambda x: x + rng.randint(1, 9))", "(lambda x: x + rng.randint(1, 9))")
    assert keeps(uncompiled, kept) and not keeps(uncompiled, kept, compiles=True)
    assert keeps(source, kept, compiles=True)


def test_a_candidate_that_breaks_a_name_is_refused_unrun_but_the_scripts_own_free_names_are_allowed():
    """pysource_minimize proposes `something(4)`, `0 .randn(4)`, `unique_name_0 = f(x)`: each raises once its line
    runs, which it must with compilation off (70 of 194 candidates on autograd_function_custom_jvp_dropped.py)."""
    from pt2doctor.reduce.program_keep import Keep

    source = ("import torch\nfrom math import pi\ndef f(x):\n    return torch.sin(x) * pi\nx = torch.randn(4)\n"
              "eager = f(x)\nc = torch.compile(f)(x)\nprint(__file__, c)\nassert torch.equal(c, eager)\n")
    keep = Keep.of(source)
    assert keep.compiles and keep.unbound == frozenset() and keep.allows(source)
    refused = [source.replace("torch.randn(4)", "something(4)"), source.replace("torch.randn", "0 .randn"),
               source.replace("eager = f(x)", "unique_name_0 = f(x)"), source.replace("eager = f(x)", "eager = 0(x)"),
               source.replace("from math import pi\n", "")]
    assert not any(keep.allows(candidate) for candidate in refused)
    allowed = [source.replace("torch.randn(4)", "torch.randn(0)"), source.replace("x = torch.randn(4)\n", "x = 0\n"),
               source.replace("eager = f(x)", "eager = (1.5).real")]
    assert all(keep.allows(candidate) for candidate in allowed)
    # a name the script itself loads unbound (a global its harness sets) stays allowed; a star import binds anything
    harnessed = Keep.of(source.replace("print(__file__, c)", "print(HARNESS, c)"))
    assert harnessed.unbound == {"HARNESS"} and harnessed.allows(source.replace("print(__file__, c)", "print(HARNESS)"))
    starred = Keep.of("from torch import *\ny = compile(sin)(randn(3))\n")
    assert starred.allows("from torch import *\ny = compile(sin)(anything(3))\n")


def test_a_wrong_results_identity_keeps_a_first_line_that_names_no_values():
    from pt2doctor.model.signature import check_identity

    # which comparison failed stays part of the failure; the values compared do not (they shrink with the program)
    assert (check_identity("AssertionError: Tensor-likes are not close!")
            == "AssertionError: Tensor-likes are not close!")
    for text in ("AssertionError: Mismatch N vs N", "AssertionError:", "AssertionError",
                 "AssertionError: run_decompositions changed the number of outputs: N -> N",
                 "AssertionError: The values for attribute 'dtype' do not match: torch.float32 != torch.int64."):
        assert check_identity(text) == "AssertionError"


@pytest.mark.slow
def test_a_program_whose_failure_needs_its_comments_is_reduced_as_written(tmp_path):
    """The backend rejects code on a line marked `# slow path` (it reads the nodes' stack traces): unparsed,
    the comment is gone and the program passes, so pysource_minimize gave up (CouldNotMinimize, issue 30).
    Whole statements deleted from the text as written reduce it, the comment kept."""
    script = Path(__file__).parent / "scripts" / "comment_dependent_backend.py"
    job = ProgramJob(script, (), "BackendCompilerFailed: NotImplementedError: picky_backend cannot compile a slow path",
                     None, tmp_path, 90.0, 60.0, reason="fallback")
    result = reduce_program(job, Lines())
    repro = Path(result.repro_path).read_text()
    assert result.verified and result.lines_after < result.lines_before
    assert "z = y.sin() * 2  # slow path" in repro and "print(helper(x).sum())" not in repro


def test_a_compile_failure_whose_script_fails_uncompiled_too_is_reduced_against_not_failing_so(pool, tmp_path):
    """pytorch#145208's shape: the script catches the compiled backward's failure and exits 1, and with compilation
    off its eager path fails too (eager flex_attention's backward does). The candidate's run is the failed compile's
    (as a traced run's signature is), not "exit status 1"; a failure only the compiler raises need only not show
    with compilation off, and no regression test is written for such a repro (it could never pass)."""
    script = Path(__file__).parents[1] / "diagnose" / "scripts" / "caught_backward_compile_error_eager_fails.py"
    job = ProgramJob(script, (), "RuntimeError: backward lowering failed", None, tmp_path, 60.0, 60.0,
                     reason="short", patience=40)
    source = script.read_text()
    assert ProgramOracle(pool, job)(source) is Outcome.FAILS_OTHER  # held to passing with compilation off: it cannot
    with pytest.raises(CannotReduce):
        reduce_program(job, Lines(), pool)
    relaxed = replace(job, off_fails_too=True)
    assert ProgramOracle(pool, relaxed)(source) is Outcome.FAILS_SAME
    repro, runs, _, held = program._write(relaxed, ProgramReduction(ProgramOracle(pool, relaxed), source, 60.0,
                                                                    Lines()))
    assert runs is not None and runs.every_time and held.off_fails_too and passes_with(held) is None
    assert "it fails otherwise, as the script did: no run without the compiler raises the failure above" in \
        repro.read_text()


@pytest.mark.slow
def test_a_reduction_that_removed_what_failed_uncompiled_is_held_to_passing_so(pool, tmp_path):
    """Reduced, what failed eagerly is gone: the repro passes with compilation off, is held to that, says so and
    gets its regression test."""
    script = Path(__file__).parents[1] / "diagnose" / "scripts" / "caught_backward_compile_error_eager_fails.py"
    job = ProgramJob(script, (), "RuntimeError: backward lowering failed", None, tmp_path, 60.0, 60.0,
                     reason="short", patience=40, compiler_raised=True)
    result = reduce_program(job, Lines(), pool)
    repro_text = Path(result.repro_path).read_text()
    assert result.verified and result.lines_after < result.lines_before, repro_text
    assert result.passes_with.startswith("with compilation off") and "it passes." in repro_text
    assert "is_compiling" not in repro_text and "reference" not in repro_text

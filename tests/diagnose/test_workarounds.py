"""Workarounds for the model's owner (issue 27): source changes made in place, and a real diagnosis that
tries them on copies of the script, narrowest first, and hands over the first that runs with its cost."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pt2doctor.analysis.workaround_edits import (
    disable_call,
    disable_function,
    disable_line_call,
    disable_operator,
    leave_out,
    own_settings,
    pin_backend_in_place,
    set_config,
    skip_decompositions,
    uncompile,
    unified_patch,
)
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.workarounds import _candidates
from pt2doctor.model.compiler_settings import for_subsystem
from pt2doctor.model.diagnosis import Workaround, handed_over
from pt2doctor.model.minify import FailureKind, FailureSignature, MinifyResult, NodeOrigin, Stage

HERE = Path(__file__).parent
SOURCE = textwrap.dedent('''\
    import torch
    import torch.nn.functional as F


    @some.decorator  # kept as written
    def head(x):
        return F.relu(x) + torch.sigmoid(x) * 3


    model = torch.compile(head, mode="max-autotune")  # a comment


    @torch.compile
    def tail(x):
        return x.cos()
''')


def test_the_culprit_call_goes_through_torch_compiler_disable_and_nothing_else_changes():
    changed = disable_call(SOURCE, 7, "torch.sigmoid")
    assert changed == SOURCE.replace("torch.sigmoid(x)", "torch.compiler.disable(torch.sigmoid)(x)")
    assert disable_call(SOURCE, 7, "relu") == SOURCE.replace("F.relu(x)", "torch.compiler.disable(F.relu)(x)")
    assert disable_call(SOURCE, 7, "torch.tanh") is None and disable_call(SOURCE, 3, "torch.sigmoid") is None


def test_each_call_of_the_minimal_graph_is_a_candidate_in_its_order_then_the_function(tmp_path):
    """Keeping the first of a kernel's calls out may leave the fault in the graph (a fused searchsorted and
    index, pytorch#186536: `torch.arange` out, the index still wrong): the next call is tried, one that makes a
    tensor from nothing (`torch.arange`: out of the graph, its value an input, the graph the same) last; a subscript
    (`operator.getitem`) is no call to wrap and costs no run."""
    script = tmp_path / "packed.py"
    script.write_text(textwrap.dedent('''\
        import torch


        def token_lengths(values, offsets):
            flat = torch.arange(values.size(0))
            seq = torch.searchsorted(offsets[1:], flat, right=True)
            return values * offsets[seq]
    '''))
    calls = [("torch.arange", 5), ("operator.getitem", 6), ("torch.searchsorted", 6), ("operator.getitem", 7)]
    origins = tuple(NodeOrigin(op="aten.x", call=call, file=str(script), line=line) for call, line in calls)
    candidates = _candidates(_minified(script, origins), script, script.read_text())
    assert [(kind, change.split(" ")[0]) for kind, change, _ in candidates] == [
        ("call", "`torch.searchsorted`"), ("call", "`torch.arange`"), ("function", "`@torch.compiler.disable`")]
    assert "`token_lengths` (packed.py:6)" in candidates[2][1]
    assert "torch.compiler.disable(torch.searchsorted)(offsets[1:], flat, right=True)" in candidates[0][2]


def test_a_culprit_whose_name_is_not_on_its_line_is_kept_out_through_the_call_that_ran_it(tmp_path):
    """fractional_max_pool_empty_window_lowering (`_m(t)[0]`: the op ran under a module) and
    normal_sample_dtype_promotion (`d.sample()`: torch.distributions called `torch.normal`) were handed the backend
    for everything: `torch.normal` or `FractionalMaxPool2d` is on no line of the script. The module's call, else the
    line's only call, goes through `torch.compiler.disable`; two culprits of one line are one candidate."""
    script = tmp_path / "m.py"
    script.write_text(textwrap.dedent('''\
        import torch

        pool = torch.nn.FractionalMaxPool2d(2, output_size=(2, 2), return_indices=True)

        def f(x, loc, scale):
            t = pool(x)[0] + torch.sin(x).sum()
            d = torch.distributions.Normal(loc, scale)
            return t, d.sample()
    '''))
    origins = (NodeOrigin(op="aten.fractional_max_pool2d.default", call="torch.nn.modules.pooling.FractionalMaxPool2d",
                          file=str(script), line=6, module="pool"),
               NodeOrigin(op="aten.expand.default", call="expand", file=str(script), line=8),
               NodeOrigin(op="aten.normal.Tensor_Tensor", call="torch.normal", file=str(script), line=8))
    candidates = _candidates(_minified(script, origins), script, script.read_text())
    assert [(kind, change.split(" ")[0]) for kind, change, _ in candidates] == [
        ("call", "`pool`"), ("call", "`d.sample`"), ("function", "`@torch.compiler.disable`")]
    assert "t = torch.compiler.disable(pool)(x)[0] + torch.sin(x).sum()" in candidates[0][2]
    assert "return t, torch.compiler.disable(d.sample)()" in candidates[1][2]
    assert disable_line_call(script.read_text(), 6) is None  # two calls on the line and no module: which is unknown


def test_an_operator_culprit_is_kept_out_as_a_call_of_the_operator_module(tmp_path):
    """float_floor_divide_off_by_one (`lambda a, b: a // b`) and saved_input_view_inplace_check_lost (`x @ w`) were
    handed the backend for every compile: the culprit `operator.floordiv` is an operator, no call on its line. Its use
    goes through `torch.compiler.disable(operator.floordiv)`, the innermost where two nest; `import operator` added
    once; an operator not on the line is no candidate."""
    script = tmp_path / "ops.py"
    script.write_text(textwrap.dedent('''\
        """A docstring."""
        import torch

        f = lambda a, b: (a // b) // 2 + a @ b.T
        g = lambda a: -a if (a < 0).all() else a
    '''))
    source = script.read_text()
    origins = (NodeOrigin(op="aten.div.Tensor_mode", call="operator.floordiv", file=str(script), line=4),
               NodeOrigin(op="aten.mm.default", call="operator.matmul", file=str(script), line=4))
    candidates = _candidates(_minified(script, origins), script, source)
    assert [(kind, change.split(" ")[0]) for kind, change, _ in candidates] == [
        ("call", "`operator.floordiv`"), ("call", "`operator.matmul`")]
    floordiv, matmul = candidates[0][2], candidates[1][2]
    assert floordiv == source.replace("import torch\n", "import torch\nimport operator\n").replace(
        "(a // b) // 2", "(torch.compiler.disable(operator.floordiv)(a, b)) // 2")
    assert "+ torch.compiler.disable(operator.matmul)(a, b.T)" in matmul and matmul.count("import operator") == 1
    negated = disable_operator(source, 5, "operator.neg")
    assert negated is not None and "torch.compiler.disable(operator.neg)(a) if" in negated
    assert "torch.compiler.disable(operator.lt)(a, 0)" in (disable_operator(source, 5, "operator.lt") or "")
    assert disable_operator(source, 5, "operator.mul") is None and disable_operator(source, 4, "torch.mul") is None
    assert disable_operator("import torch\nimport operator\ny = a % b\n", 3, "operator.mod") == (
        "import torch\nimport operator\ny = torch.compiler.disable(operator.mod)(a, b)\n")


def test_no_call_is_kept_out_where_every_compile_refuses_a_graph_break(tmp_path):
    """int8_bmm_dtype: `torch.compile(model, fullgraph=True)`; the copy with `torch.compiler.disable(torch.matmul)`
    failed with "Attempted to call function marked as skipped", a whole-program run for nothing."""
    script = tmp_path / "bmm.py"
    script.write_text("import torch\n\ndef model(a, b):\n    return torch.matmul(a, b)\n\n"
                      "c = torch.compile(model, fullgraph=True)(a, b)\n")
    found = _minified(script, (NodeOrigin(op="aten.bmm.default", call="torch.matmul", file=str(script), line=4),))
    assert _candidates(found, script, script.read_text()) == []  # nor the function: the compile target itself
    script.write_text(script.read_text().replace("fullgraph=True", "fullgraph=False"))
    assert [kind for kind, _, _ in _candidates(found, script, script.read_text())] == ["call"]


def test_a_reduced_programs_culprit_calls_are_kept_out_where_the_script_makes_them(tmp_path):
    """parameter_view_mutation_no_grad and input_mutation_alias_no_recompile (AOTAutograd-stage failures no graph
    showed) were handed `backend='eager'` for everything: the reduced program names `param1.mul_`, which the script
    makes as written; kept out of the graph, the mutation runs eagerly. A `with` item (`torch.no_grad()`) is no
    candidate, nor the `forward` of the module `torch.compile(model)` compiles (that whole compile, uncompiled)."""
    from pt2doctor.model.diagnosis import ProgramRepro

    script = tmp_path / "m.py"
    script.write_text(textwrap.dedent('''\
        import torch


        class M(torch.nn.Module):
            def forward(self, x):
                param1 = torch.nn.Parameter(x.relu())
                with torch.no_grad():
                    param1.mul_(2.0)
                return param1


        model = M()
        torch.compile(model)(torch.randn(4))
    '''))
    found = Found(command=(str(script),))
    found.program = ProgramRepro(str(tmp_path / "repro.py"), "x", None, "fallback", 20, 9, 1, 0.1, 1.0, True,
                                 culprit_ops=("torch.no_grad", "param1.mul_"))
    candidates = _candidates(found, script, script.read_text())
    assert [(kind, change.split(" ")[0]) for kind, change, _ in candidates] == [("call", "`param1.mul_`")]
    assert "torch.compiler.disable(param1.mul_)(2.0)" in candidates[0][2]


def _minified(script: Path, origins: tuple[NodeOrigin, ...]) -> Found:
    """A diagnosis of `script` whose verified minimal graph's nodes came from `origins`."""
    found = Found(command=(str(script),))
    found.minify = MinifyResult("g0001", Stage.AOT, FailureSignature(FailureKind.EXCEPTION, "x"), 8, 4, (), (), 1, 0,
                                1.0, True, str(script.parent / "repro.py"), origins=origins)
    return found


def test_the_stages_backend_goes_ahead_only_where_it_is_next_but_for_a_setting_the_search_may_find(tmp_path):
    """GPT-2's wrong kernel: the culprit (a relu) is a library's call, the script sets no compiler setting, so after the
    settings search the next candidate is the passing backend for every compile: its run starts ahead, at low
    priority, beside the search. Where a call of the script's own can be kept out it is tried first: nothing ahead."""
    from pt2doctor.diagnose.workarounds import HandOverSoFar, start_fallback
    from pt2doctor.model import Category
    from pt2doctor.model.diagnosis import FailingStage

    class Runner:  # what `start_fallback` asks of the variant runner: the script, whether a GPU is shared, `ahead`
        def __init__(self, script: Path) -> None:
            self.call = type("Call", (), {"script": script})()
            self.gpu = type("Share", (), {"limit": None})()
            self.started: list[str] = []

        def ahead(self, variant) -> None:
            self.started.append(variant.label)

    script = tmp_path / "train.py"
    script.write_text("import torch\nfrom lib import block\n\n\n@torch.compile\ndef step(x):\n"
                      "    return block(torch.relu(x))\n")
    library = NodeOrigin(op="aten.relu.default", call="torch.relu", file=str(tmp_path / "lib.py"), line=3)
    own = NodeOrigin(op="aten.relu.default", call="torch.relu", file=str(script), line=7)
    for origins, started in (((library,), ["aot_eager_decomp_partition"]), ((own, library), [])):
        found = _minified(script, origins)
        found.category, found.stage = Category.ACCURACY, FailingStage.INDUCTOR
        found.stages = {"eager": "pass", "aot_eager": "pass", "aot_eager_decomp_partition": "pass", "inductor": "fail"}
        runner = Runner(script)
        start_fallback(runner, found, HandOverSoFar())  # type: ignore[arg-type]
        assert runner.started == started


def test_the_first_call_workaround_goes_ahead_once_the_minifiers_first_cut_names_a_call_of_the_script(tmp_path):
    """The ResNet program's softmax: once the minifier's first passes cut the graph to it, the copy calling it through
    `torch.compiler.disable` starts ahead, as `find_workarounds` will write it; a library's call, or a script making a
    compiler setting of its own (tried first), starts nothing."""
    from pt2doctor.diagnose.workarounds import _candidates, start_call
    from pt2doctor.model import Category
    from pt2doctor.model.diagnosis import FailingStage

    class Runner:  # what `start_call` asks of the variant runner
        def __init__(self, script: Path) -> None:
            self.call = type("Call", (), {"script": script, "out_dir": tmp_path / "out"})()
            self.gpu = type("Share", (), {"limit": None})()
            self.reporter = type("Quiet", (), {"status": lambda self, text: None})()
            self.closed = False
            self.started: list[tuple[Path, str, str]] = []

        def copy_ahead(self, folder: Path, label: str, text: str) -> None:
            self.started.append((folder, label, text))

    script = tmp_path / "train.py"
    body = "import torch\nfrom lib import block\n\n\n@torch.compile\ndef step(x):\n    return block(torch.relu(x))\n"
    own = NodeOrigin(op="aten.relu.default", call="torch.relu", file=str(script), line=7)
    library = NodeOrigin(op="aten.relu.default", call="torch.relu", file=str(tmp_path / "lib.py"), line=3)
    setting = "import torch._inductor.config as c\nc.fallback_random = True\n"
    for text, origins, starts in ((body, (own,), True), (body, (library,), False), (setting + body, (own,), False)):
        script.write_text(text)
        found = Found(command=(str(script),))
        found.category, found.stage = Category.BACKEND_FAILURE, FailingStage.BACKEND
        runner = Runner(script)
        start_call(runner, found, origins)  # type: ignore[arg-type]
        if not starts:
            assert runner.started == []
            continue
        ((folder, label, copy),) = runner.started
        found.minify = _minified(script, origins).minify  # what the minifier then ends at: the same call
        kind, _, written = _candidates(found, script.resolve(), text)[0]
        assert (folder, label, kind) == (tmp_path / "out" / "workaround" / "call", "workaround-call", "call")
        assert copy == written and "torch.compiler.disable(torch.relu)(x)" in copy


def test_the_function_holding_the_line_is_disabled_above_its_decorators():
    source = SOURCE.replace("model = torch.compile(head", "model = torch.compile(lambda x: head(x)")
    changed, name = disable_function(source, 7) or ("", "")
    assert name == "head" and changed == source.replace("@some.decorator", "@torch.compiler.disable\n@some.decorator")
    assert disable_function(source, 10) is None  # module level: no function holds it


def test_a_function_a_site_compiles_itself_is_no_function_to_disable():
    """int8_bmm_dtype, fractional_max_pool_empty_window_lowering, ...: `@torch.compiler.disable` on `model` with
    `torch.compile(model)` later: torch.compile unwraps it and compiles `model` all the same (the copy failed as
    before, a whole-program run spent for nothing); on a `@torch.compile` function it is that site uncompiled."""
    assert disable_function(SOURCE, 7) is None  # `torch.compile(head, ...)`
    assert disable_function(SOURCE, 15) is None  # `@torch.compile` on `tail`


def test_torch_compile_compiles_a_disabled_function_all_the_same():
    """Why the rule above holds, on the installed torch (if a torch ever honours the mark, the rule can go)."""
    torch = pytest.importorskip("torch")

    @torch.compiler.disable
    def f(x):
        return x + 1

    counts = []

    def backend(gm, example_inputs):
        counts.append(gm)
        return gm

    torch.compile(f, backend=backend)(torch.ones(2))
    assert len(counts) == 1


def test_the_backend_is_written_into_each_compile_call_as_written():
    changed = pin_backend_in_place(SOURCE, "aot_eager")
    assert 'model = torch.compile(head, mode="max-autotune", backend=\'aot_eager\')  # a comment' in changed
    assert "@torch.compile(backend='aot_eager')\ndef tail(x):" in changed
    patch = unified_patch(SOURCE, changed, "train.py")
    added = [line for line in patch.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert patch.startswith("--- train.py\n+++ train.py\n") and len(added) == 2  # the two changed lines alone


def test_a_script_that_does_not_import_torch_by_name_gets_no_change():
    other = SOURCE.replace("import torch\n", "import torch as T\n", 1)
    assert disable_call(other, 7, "torch.sigmoid") is None and pin_backend_in_place(other, "eager") is None


def test_a_config_is_set_after_the_last_import_before_any_code_runs():
    setting = for_subsystem("inductor_fallback_random")
    assert setting is not None
    changed = set_config(SOURCE, setting.module, setting.line)
    assert changed == SOURCE.replace("import torch.nn.functional as F\n", "import torch.nn.functional as F\n"
                                     "import torch._inductor.config\ntorch._inductor.config.fallback_random = True\n")
    import torch._inductor.config as inductor_config

    namespace: dict = {}
    with inductor_config.patch(fallback_random=inductor_config.fallback_random):  # put back: later tests read it
        exec(compile("\n".join(changed.splitlines()[:4]), "x.py", "exec"), namespace)  # it runs as written


def test_the_scripts_own_compiler_settings_are_found_however_it_names_the_config_and_left_out_in_place():
    source = textwrap.dedent('''\
        import torch
        import torch._inductor.config as inductor_config
        from torch._dynamo import config
        import torch._functorch.config

        inductor_config.triton.use_tensor_descriptor = True
        if torch.cuda.is_available():
            config.cache_size_limit = 4  # on the GPU
        torch._functorch.config.donated_buffer = False
        torch._inductor.config.freezing = True  # written in full, never imported by that name
        other.config.freezing = True
        torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"  # the bug under study
        inductor_config.max_autotune = True; inductor_config.cpp_wrapper = True
        if torch.cuda.is_available(): inductor_config.epilogue_fusion = False
        try:
            pass
        finally:
            inductor_config.coordinate_descent_tuning = True
    ''')
    assert own_settings(source) == [(6, "inductor_config.triton.use_tensor_descriptor = True"),
                                    (8, "config.cache_size_limit = 4"),
                                    (9, "torch._functorch.config.donated_buffer = False"),
                                    (10, "torch._inductor.config.freezing = True"),
                                    (18, "inductor_config.coordinate_descent_tuning = True")]
    assert leave_out(source, 6) == source.replace("inductor_config.triton", "# inductor_config.triton")
    for line in (8, 18):  # the only statement of its block (an `if`, a `finally`): a `pass` keeps the block
        left = leave_out(source, line)
        assert left.splitlines()[line - 1].lstrip().startswith("pass  # ")
        compile(left, "x.py", "exec")


def test_a_name_the_script_rebinds_is_not_its_config():
    source = "import torch\nfrom torch._dynamo import config\n\nconfig = {}\nconfig.lr = 3\n"
    assert own_settings(source) == []


def test_the_scripts_own_settings_are_the_first_candidates_and_the_calls_keep_their_three(tmp_path):
    script = tmp_path / "tma.py"
    script.write_text(textwrap.dedent('''\
        import torch
        import torch._inductor.config as c

        c.triton.use_tensor_descriptor = True
        c.assume_aligned_inputs = True
        c.max_autotune = True


        def f(x):
            return torch.sin(x).cos().exp().tanh()
    '''))
    calls = ("torch.sin", "cos", "exp", "tanh")
    origins = tuple(NodeOrigin(op="aten.x", call=call, file=str(script), line=10) for call in calls)
    found = Found(command=(str(script),))
    found.minify = MinifyResult("g0001", Stage.AOT, FailureSignature(FailureKind.EXCEPTION, "x"), 8, 4, (), (), 1, 0,
                                1.0, True, str(tmp_path / "repro.py"), origins=origins)
    candidates = _candidates(found, script, script.read_text())
    assert [kind for kind, _, _ in candidates] == ["config"] * 3 + ["call"] * 3 + ["function"]
    assert candidates[0][1] == "`c.triton.use_tensor_descriptor = True` (tma.py:4) left out, so that setting keeps " \
                               "torch's default"
    assert "\n# c.triton.use_tensor_descriptor = True\n" in candidates[0][2]


def test_the_narrowest_verified_workaround_is_handed_over_whatever_order_they_were_tried_in():
    call = Workaround("call", "", True, "ran", kind="call")
    config = Workaround("config", "", True, "ran", kind="config")
    failed = Workaround("config2", "", False, "still fails", kind="config")
    backend = Workaround("backend", "", True, "ran", kind="backend")
    assert handed_over([backend, call, failed, config]) is config
    assert handed_over([backend, call]) is call and handed_over([failed]) is None


@pytest.mark.slow
def test_the_narrowest_change_that_runs_is_handed_over_with_its_cost(diagnosed):
    """A backend that cannot compile sigmoid, in one of two compiled functions: the sigmoid call made through
    torch.compiler.disable runs, every other graph still compiled by the user's backend."""
    run, d = diagnosed(HERE / "scripts" / "two_functions_picky_backend.py", options=("--cost",))
    (first, *_) = d["workarounds"]
    assert first["verified"] and "torch.compiler.disable(...)" in first["change"], d["workarounds"]
    assert "+    return torch.compiler.disable(torch.sigmoid)(x) * 3" in first["patch"]
    assert first["graphs_kept_compiled"] >= 2 and first["cost"]["seconds"] > 0
    assert first["cost"]["all_eager_s"] is not None  # --cost: the run with compilation off, beside it
    assert {s["step"]: s["whole"] for s in d["runs"]["steps"]}["workarounds"] == 2  # the copy's run, the baseline
    assert (run.out_dir / "workaround.patch").read_text() == first["patch"]
    assert "**Workaround** (verified" in (run.out_dir / "issue.md").read_text()
    assert d["next_steps"][0].startswith("Workaround, verified on a copy of your script")


@pytest.mark.slow
def test_a_setting_the_script_makes_that_breaks_the_compile_is_left_out_first(diagnosed):
    """The script limits max-autotune's GEMM backends to Triton, on a CPU: no choice for its matmul. Leaving its own
    setting out (torch's default kept) compiles every graph, the narrowest change of all."""
    run, d = diagnosed(HERE / "scripts" / "own_setting_no_gemm_choice.py", options=("--no-bisect",))
    first = next(w for w in d["workarounds"] if w["verified"])
    assert first["kind"] == "config" and first["change"].startswith("`inductor_config.max_autotune"), d["workarounds"]
    assert "left out, so that setting keeps torch's default" in first["change"] and first["graphs_kept_compiled"] >= 1
    assert "+# inductor_config.max_autotune" in first["patch"]
    assert d["next_steps"][0].startswith("Workaround, verified on a copy of your script")


def test_each_compile_site_can_compile_nothing_alone():
    sites = uncompile(SOURCE)
    assert [(site, line) for _, site, line in sites] == [
        ('torch.compile(head, mode="max-autotune")', 10), ("@torch.compile on `tail`", 13)]
    first, second = (text for text, _, _ in sites)
    assert first == SOURCE.replace('torch.compile(head, mode="max-autotune")', "head")
    assert second == SOURCE.replace("@torch.compile\ndef tail", "def tail")


def test_decompositions_are_left_out_where_the_program_calls_them():
    source = "import torch\nep = torch.export.export(m, (x,))\nep = ep.run_decompositions({})  # as traced\nprint(ep)\n"
    assert skip_decompositions(source) == source.replace("ep.run_decompositions({})", "ep")
    assert skip_decompositions("import torch\nep = torch.export.export(m, (x,))\n") is None

"""The compiler settings a workaround may flip: one table, narrowest first, and what a search over it found.

Each `Setting` is one key of one of torch's compiler configs set to one value: what it turns off or on
(`touches`), the devices whose code it changes, the ops a graph must hold for it to matter (`needs_ops`, a
regular expression over the graph's op names; empty: any graph; `draws`: a random op, by the accuracy rule's test),
and the `CompilerBisector` subsystem it turns off, where it turns off one alone. The table is ordered from the setting
that takes least away (an emulation that keeps every optimisation) to the broadest (no fusion at all): the first that
removes a failure is the narrowest. A key the installed torch lacks, or one already at that value, is not tried
(`capture.torch_compat.config_value` reads it there): a new torch brings its own keys and defaults.

`diagnose.setting_search` tries the table on the minimal failing graph (Dynamo's rows, for a failure no graph shows,
on the reduced program, and its rows of how inputs are specialized on a reduced program past Dynamo too);
`diagnose.workarounds` confirms what passed on the whole program and hands over the narrowest verified one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Device = Literal["cpu", "cuda"]
INDUCTOR, FUNCTORCH, DYNAMO = "torch._inductor.config", "torch._functorch.config", "torch._dynamo.config"
_REDUCTIONS = r"sum|mean|amax|amin|max|min|var|std|norm|softmax|prod|argmax|argmin|any|all|cumsum|cumprod|logsumexp"


@dataclass(frozen=True, slots=True)
class Setting:
    module: str  # `torch._inductor.config`
    key: str  # `split_reductions`, `triton.persistent_reductions`
    value: bool | int | str
    touches: str  # what it changes, in words: "split reductions"
    devices: tuple[Device, ...] = ("cpu", "cuda")
    needs_ops: str = ""  # a regular expression one of the graph's ops must match
    draws: bool = False  # one of the graph's ops must draw random numbers (`torch_compat.names_a_random_op`)
    subsystem: str = ""  # the CompilerBisector subsystem this turns off alone
    # where it acts: "lowering" inside Inductor's compile of a graph AOTAutograd made (lowering, scheduling, code
    # generation: the minimal after-AOT graph shows it); "graph" before that (decompositions, the joint graph, the
    # partitioner, pre-grad passes, precision emulation): only the Dynamo graph compiled whole shows it
    phase: Literal["lowering", "graph"] = "graph"
    # read by Inductor's decomposition table (`select_decomp_table`), which `aot_eager_decomp_partition` decomposes
    # with too: the row can change a failure at that stage, though no Inductor code runs there
    decompositions: bool = False
    # Dynamo's: how it specializes the program's inputs (a float a constant, a size dynamic), which decides the
    # graphs every later stage is given: tried on a reduced program past Dynamo too (pytorch#194976: Inductor burns a
    # float made dynamic into its graph with a guard its cache drops; `specialize_float = True` avoids it)
    specializes: bool = False
    # rows that each switch off one way through the same code generation (the C++ vectoriser's loops, a reduction's
    # kernel, a TMA load): one can send the graph down the very path another avoids (uint8_abs_cat_sum: without
    # the tiling heuristics the failure goes, and comes back with the loop tail or all vectorisation off as well),
    # so the settings search never sets two rows of one family in one run
    family: str = ""

    @property
    def line(self) -> str:
        """The assignment a script makes (`torch._inductor.config.split_reductions = False`)."""
        return f"{self.module}.{self.key} = {self.value!r}"

    @property
    def effect(self) -> str:
        """What the program gets with it, in words: an emulation turned on, else an optimisation turned off."""
        return f"{'with' if self.value is True else 'without'} {self.touches}"

    @property
    def name(self) -> str:
        return f"{self.module}.{self.key}"


LOWERING: Literal["lowering"] = "lowering"

SETTINGS: tuple[Setting, ...] = (
    # emulations: every optimisation stays, the compiled code rounds or draws as eager does
    Setting(INDUCTOR, "emulate_precision_casts", True, "low-precision rounding emulated as eager rounds",
            subsystem="inductor_emulate_precision_casts"),
    Setting(INDUCTOR, "fallback_random", True, "random ops drawn by eager's generator", draws=True,
            subsystem="inductor_fallback_random", decompositions=True),
    # one optimisation of one kind of op
    Setting(INDUCTOR, "online_softmax", False, "the one-pass (online) softmax", needs_ops="softmax"),
    Setting(INDUCTOR, "optimize_scatter_upon_const_tensor", False, "scatter into a constant tensor rewritten",
            needs_ops="scatter"),
    Setting(INDUCTOR, "triton.persistent_reductions", False, "persistent reductions", devices=("cuda",),
            needs_ops=_REDUCTIONS, phase=LOWERING, family="reductions"),
    Setting(INDUCTOR, "triton.mix_order_reduction", False, "reductions of mixed order fused", devices=("cuda",),
            needs_ops=_REDUCTIONS, phase=LOWERING, family="reductions"),
    Setting(INDUCTOR, "split_reductions", False, "large reductions split in two", needs_ops=_REDUCTIONS,
            phase=LOWERING, family="reductions"),
    Setting(INDUCTOR, "shape_padding", False, "matmul shapes padded", needs_ops=r"mm|matmul|linear|addmm|bmm"),
    Setting(INDUCTOR, "layout_optimization", False, "convolutions' layout changed (channels last)",
            needs_ops="convolution|conv", subsystem="inductor_layout_optimization", phase=LOWERING),
    # code generation
    Setting(INDUCTOR, "cpp.enable_loop_tail_vec", False, "the vectorised loop tail", devices=("cpu",), phase=LOWERING,
            family="cpp_vectorisation"),
    Setting(INDUCTOR, "cpp.enable_tiling_heuristics", False, "the C++ tiling heuristics", devices=("cpu",),
            phase=LOWERING, family="cpp_vectorisation"),
    Setting(INDUCTOR, "cpp.simdlen", 1, "vectorisation of the C++ kernels", devices=("cpu",), phase=LOWERING,
            family="cpp_vectorisation"),
    Setting(INDUCTOR, "triton.use_tensor_descriptor", False, "TMA tensor descriptors", devices=("cuda",),
            phase=LOWERING, family="tma"),
    Setting(INDUCTOR, "triton.enable_persistent_tma_matmul", False, "the persistent TMA matmul", devices=("cuda",),
            phase=LOWERING, family="tma"),
    Setting(INDUCTOR, "max_autotune", False, "autotuning of matmuls and convolutions", phase=LOWERING),
    Setting(INDUCTOR, "coordinate_descent_tuning", False, "coordinate-descent tuning of kernels", phase=LOWERING,
            decompositions=True),
    Setting(INDUCTOR, "cpp_wrapper", False, "the C++ wrapper", phase=LOWERING),
    Setting(INDUCTOR, "triton.cudagraphs", False, "CUDA graphs", devices=("cuda",), subsystem="cudagraphs",
            phase=LOWERING),
    # scheduling and memory
    Setting(INDUCTOR, "loop_ordering_after_fusion", False, "loops reordered after fusion", phase=LOWERING),
    Setting(INDUCTOR, "reorder_for_locality", False, "kernels reordered for locality", phase=LOWERING),
    Setting(INDUCTOR, "reorder_for_peak_memory", False, "kernels reordered for peak memory", phase=LOWERING),
    Setting(INDUCTOR, "inplace_buffers", False, "kernels writing in place", phase=LOWERING),
    Setting(INDUCTOR, "allow_buffer_reuse", False, "buffers reused", phase=LOWERING),
    Setting(INDUCTOR, "comprehensive_padding", False, "strides padded", subsystem="inductor_comprehensive_padding",
            phase=LOWERING),
    # graph passes
    Setting(INDUCTOR, "joint_graph_constant_folding", False, "constant folding of the joint graph"),
    Setting(INDUCTOR, "split_cat_fx_passes", False, "the split/cat passes"),
    Setting(INDUCTOR, "batch_fusion", False, "the batch fusion passes"),
    Setting(FUNCTORCH, "donated_buffer", False, "buffers donated to the backward"),
    Setting(FUNCTORCH, "cse", False, "common-subexpression elimination of the joint graph",
            subsystem="aot_eager_decomp_partition_cse"),
    Setting(INDUCTOR, "epilogue_fusion", False, "epilogues fused into templates", phase=LOWERING),
    Setting(INDUCTOR, "prologue_fusion", False, "prologues fused into templates", phase=LOWERING),
    Setting(INDUCTOR, "pattern_matcher", False, "every pattern-matcher pass (joint and post-grad)",
            subsystem="joint_graph_passes"),
    # broadest: every kernel one op
    Setting(INDUCTOR, "max_fusion_size", 1, "fusion (every kernel one op)", phase=LOWERING),
    # Dynamo's (a Dynamo-stage failure: tried on the reduced program, `needs_ops` read against what its compiled code
    # calls and the state written between its calls): guards it leaves out, what it traces of one construct, then
    # how it specializes every input
    Setting(DYNAMO, "assume_dunder_attributes_remain_unchanged", False,
            "dunder attributes (`__code__`, `__defaults__`) assumed unchanged, unguarded",
            needs_ops=r"__(?!dict__)\w+__"),
    Setting(DYNAMO, "guard_nn_modules_using_dict_tags", False, "nn.Module guards by their `__dict__`'s version tag",
            needs_ops=r"__dict__|\bself\."),
    Setting(DYNAMO, "skip_tensor_guards_with_matching_dict_tags", False,
            "tensor guards skipped where a `__dict__`'s version tag matches", needs_ops="__dict__"),
    Setting(DYNAMO, "trace_numpy", False, "NumPy calls traced as torch ops", needs_ops=r"\bnumpy\.|\bnp\."),
    Setting(DYNAMO, "capture_autograd_function", False, "autograd.Function traced into the graph",
            needs_ops=r"autograd\.Function|\.apply\b"),
    Setting(DYNAMO, "capture_func_transforms", False, "torch.func transforms traced into the graph",
            needs_ops=r"torch\.func\.|functorch|vmap"),
    Setting(DYNAMO, "inline_invoke_subgraph", True, "nested compile regions inlined",
            needs_ops="nested_compile_region|invoke_subgraph"),
    Setting(DYNAMO, "specialize_float", True, "float inputs specialized (a recompile per value)", specializes=True),
    Setting(DYNAMO, "specialize_int", True, "int inputs specialized (a recompile per value)", specializes=True),
    Setting(DYNAMO, "automatic_dynamic_shapes", False, "shapes made dynamic after a recompile", specializes=True),
)

# Subsystems a setting turns off that the table names under another (both pattern passes turn off together).
_ALSO = {"post_grad_passes": "joint_graph_passes"}


def for_subsystem(subsystem: str) -> Setting | None:
    """The setting that turns off what `CompilerBisector` blamed, where one does."""
    subsystem = _ALSO.get(subsystem, subsystem)
    return next((s for s in SETTINGS if s.subsystem == subsystem), None)


@dataclass(frozen=True, slots=True)
class SettingTrial:
    """One setting tried on the minimal graph (or the reduced program): `outcome` `pass` (the failure is gone),
    `fail` (the same failure), or how it ended otherwise (`fails otherwise: ...`, `timeout`). `together`: how many
    settings the run that settled it set (1: it alone; more: the failure stayed the same with all of them set at once,
    and each is taken not to remove it alone)."""

    setting: str  # its line, `torch._inductor.config.split_reductions = False`
    touches: str
    outcome: str
    together: int = 1


# the passing rows the workarounds try on a copy of the script, narrowest first, one run each: a row that removes the
# failure on the minimal graph may not on the program (random inputs, other graphs), so the search looks for this many
TRIED_ON_THE_SCRIPT = 2


@dataclass(frozen=True, slots=True)
class SettingSearch:
    """The table tried on the minimal failing graph (`graph`: the repro it ran), or on the reduced program where no
    graph verified (`on`), narrowest first, several rows a run where that settles them (`diagnose.setting_search`),
    until `TRIED_ON_THE_SCRIPT` rows alone removed the failure, in `runs` runs; `skipped` says which rows did not
    apply and why in brief."""

    graph: str
    trials: tuple[SettingTrial, ...] = ()
    skipped: int = 0  # rows not tried: a key the installed torch lacks or has at that value, another device, no op
    seconds: float = 0.0
    why_not: str = ""  # where nothing was tried: why
    untried: int = 0  # rows that applied but were not tried: the search's time budget ran out first
    on: str = "the minimal graph"  # what each row was tried on, in words ("the reduced program")
    runs: int = 0  # graph-level runs (or the reduced program's) the search made

    @property
    def passed(self) -> tuple[SettingTrial, ...]:
        return tuple(t for t in self.trials if t.outcome == "pass")

    @property
    def passed_settings(self) -> tuple[Setting, ...]:
        """The table's rows that removed the failure, in the table's order (narrowest first)."""
        lines = {t.setting for t in self.passed}
        return tuple(s for s in SETTINGS if s.line in lines)

    def describe(self) -> str:
        if self.why_not:
            return f"no compiler setting tried: {self.why_not}"
        passed = ", ".join(f"`{t.setting}`" for t in self.passed) or "none"
        rest = f"; {self.untried} more not tried, past the search's time budget" if self.untried else ""
        together = sum(t.together > 1 for t in self.trials)
        at_once = f"; {together} only set with others at once, the failure unchanged" if together else ""
        return (f"{len(self.trials)} compiler setting(s) tried on {self.on} ({self.runs} run(s), {self.seconds:.1f} s"
                f"{at_once}), removing the failure: {passed}{rest}")

"""Every private torch API pt2doctor touches, in one place, with the versions it was checked on.

Contract: the rest of pt2doctor imports torch internals only through this package, by this one name
(`from pt2doctor.capture import torch_compat`). Each function says which torch versions it was
checked on; when a later torch moves something, the fix is here. Checked on: torch 2.13.0 (CPU,
this repo's CI) and 2.11 (CUDA, the lent GPU machine). The functions live in one module per
pt2doctor subsystem that needs them; a new subsystem gets a module of its own:
- `observe`: the structured trace, config, the in-process watch and the advisors;
- `record`: the graph recorder's seams, repro material, caches and configs;
- `accuracy_rule`: the accuracy rule (fp64 reference, comparison, RNG guard, random ops), embedded
  verbatim in every repro, so torch-only;
- `diagnose`: the compiler bisector and frame recordings;
- `warm`: warming fresh interpreters up (the minifier's workers and verifier), autotuning anew in them, and torch's
  logging set up again in a process forked after the import;
- `minify`: the minifier's FX adapter (fake propagation, the op-overload test);
- `fx_trace`: a graph as code (the recorder's) and rebuilt from its code with every op in it (the loader and repros);
- `aoti`: an exported program's graph and the values of its inputs (minifying an AOTInductor failure).
- `kernels`: runtime triage: Inductor's debug config, each kernel's fused FX nodes, the output code's kernels;
- `provenance`: where an FX node came from in the user's program (`node.meta`).
- `sources`: where the installed torch handles an op or a bisected subsystem (lowerings, decompositions).
- `reached`: what of the compiler a reduced program reached: Dynamo's variable trackers that traced its lines,
  AOTAutograd's code a plain program does not reach (a Dynamo- or AOTAutograd-stage bug's place).
- `flight_recorder`: the collectives a rank issued (torch's Flight Recorder, NCCL and gloo).
- `pytree`: flattening nested containers of tensors as torch does (the accuracy probe, the export checks).
"""

from typing import Any

from pt2doctor.capture.torch_compat.aoti import example_call, program_inputs
from pt2doctor.capture.torch_compat.diagnose import (
    bisector_subsystems,
    compile_dynamic,
    compile_every_time,
    compiler_bisector,
    install_bisect_policy,
    is_graph_break,
    patch_dynamo_exception_handler,
)
from pt2doctor.capture.torch_compat.flight_recorder import BUFFER_SIZE as FLIGHT_RECORDER_SIZE
from pt2doctor.capture.torch_compat.flight_recorder import dump_file_env as flight_recorder_dump_env
from pt2doctor.capture.torch_compat.flight_recorder import dumps as flight_recorder_dumps
from pt2doctor.capture.torch_compat.flight_recorder import env as flight_recorder_env
from pt2doctor.capture.torch_compat.fx_trace import (
    fx_module_source,
    graph_module,
    graph_module_source,
    opaque_calls,
    torch_ops_called,
)
from pt2doctor.capture.torch_compat.kernels import (
    is_triton_launcher,
    kernel_debug_config,
    kernel_nodes,
    kernel_provenance_keys,
    output_code_namespace,
    replace_call,
)
from pt2doctor.capture.torch_compat.minify import fake_tensor_mode, is_op_overload, is_operator, mutates_an_argument
from pt2doctor.capture.torch_compat.observe import (
    RUNTIME_ESTIMATES_ENV,
    config_diff,
    config_module,
    dynamo_config,
    dynamo_explain,
    interned_strings,
    patch_torch_compile,
    pin_stance,
    reset_dynamo,
    trace_formatter,
    trace_logger,
)
from pt2doctor.capture.torch_compat.provenance import node_origin
from pt2doctor.capture.torch_compat.pytree import tree_flatten, tree_leaves, tree_unflatten
from pt2doctor.capture.torch_compat.reached import aot_paths, dynamo_trackers
from pt2doctor.capture.torch_compat.record import (
    accuracy_rule_source,
    aot_autograd_kwargs,
    aot_cache_hits,
    autotune_anew_as_own,
    backend_chain,
    config_checkpoint,
    config_lines,
    count_dynamo_resets,
    cuda_fork_poisoned,
    current_compile_id,
    disable_aot_autograd_cache,
    failed_compiles,
    forget_compiles,
    inductor_prim_calls,
    is_zero_tensor,
    judgeable,
    node_example_value,
    patch_aot_compilers,
    patch_backend_call,
    patch_inductor_inner_compile,
    qualified_name,
    register_inductor_prims,
    registered_backends,
    state_checkpoint,
    symint_hint,
    unwrap_backend_exception,
)
from pt2doctor.capture.torch_compat.sources import MISSING as CONFIG_MISSING
from pt2doctor.capture.torch_compat.sources import aoti_input_checks_ref, config_value, where_to_look
from pt2doctor.capture.torch_compat.warm import (
    autotune_anew,
    autotune_anew_source,
    compile_tiny_graph,
    import_dynamo,
    logs_from_env_source,
    prewarm_inductor,
    prewarm_inductor_source,
)

__all__ = [
    "aoti_input_checks_ref",
    "CONFIG_MISSING",
    "FLIGHT_RECORDER_SIZE",
    "flight_recorder_dump_env",
    "flight_recorder_env",
    "flight_recorder_dumps",
    "RUNTIME_ESTIMATES_ENV",
    "node_origin",
    "trace_logger",
    "trace_formatter",
    "dynamo_explain",
    "config_diff",
    "reset_dynamo",
    "interned_strings",
    "dynamo_config",
    "config_module",
    "patch_torch_compile",
    "pin_stance",
    "patch_backend_call",
    "patch_inductor_inner_compile",
    "patch_aot_compilers",
    "backend_chain",
    "registered_backends",
    "current_compile_id",
    "count_dynamo_resets",
    "symint_hint",
    "is_zero_tensor",
    "fx_module_source",
    "judgeable",
    "register_inductor_prims",
    "inductor_prim_calls",
    "graph_module",
    "graph_module_source",
    "torch_ops_called",
    "opaque_calls",
    "aot_autograd_kwargs",
    "config_lines",
    "config_value",
    "qualified_name",
    "unwrap_backend_exception",
    "autotune_anew_as_own",
    "disable_aot_autograd_cache",
    "aot_cache_hits",
    "failed_compiles",
    "forget_compiles",
    "cuda_fork_poisoned",
    "config_checkpoint",
    "state_checkpoint",
    "accuracy_rule_source",
    "copy_inputs",
    "fp64_module",
    "reference_runs",
    "same_outputs",
    "same_as_fp64_reference",
    "kept_state",
    "rng_state",
    "set_rng_state",
    "random_ops",
    "names_a_random_op",
    "op_name",
    "node_example_value",
    "compiler_bisector",
    "compile_every_time",
    "bisector_subsystems",
    "install_bisect_policy",
    "patch_dynamo_exception_handler",
    "is_graph_break",
    "compile_dynamic",
    "prewarm_inductor",
    "prewarm_inductor_source",
    "autotune_anew",
    "autotune_anew_source",
    "logs_from_env_source",
    "import_dynamo",
    "compile_tiny_graph",
    "fake_tensor_mode",
    "is_op_overload",
    "program_inputs",
    "example_call",
    "is_operator",
    "mutates_an_argument",
    "where_to_look",
    "dynamo_trackers",
    "aot_paths",
    "kernel_debug_config",
    "kernel_nodes",
    "kernel_provenance_keys",
    "output_code_namespace",
    "replace_call",
    "is_triton_launcher",
    "tree_flatten",
    "tree_leaves",
    "tree_unflatten",
]

# The accuracy rule imports torch at its top (a repro embeds it as it is), so it loads on first use:
# importing this package must not import torch.
_ACCURACY_RULE = ("copy_inputs", "fp64_module", "reference_runs", "same_outputs", "same_as_fp64_reference",
                  "kept_state", "rng_state",
                  "set_rng_state", "random_ops", "names_a_random_op", "op_name")


def __getattr__(name: str) -> Any:
    if name in _ACCURACY_RULE:
        from pt2doctor.capture.torch_compat import accuracy_rule

        return getattr(accuracy_rule, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Private torch APIs for recording and replaying graphs: the backend and Inductor seams, config as code (a graph's
source: `fx_trace.fx_module_source`), caches, configs to restore (capture.child.graph_recorder,
capture.child.accuracy_probe, reduce); the accuracy rule itself is `accuracy_rule`. See the package contract in
`torch_compat/__init__.py`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from pt2doctor.model.ids import RESET_ARTIFACT, CompileId


def patch_backend_call(wrapper: Callable[..., Any]) -> Callable[[], None]:
    """Route every Dynamo backend call through `wrapper(original, output_graph, gm, example_inputs)`.

    `OutputGraph._call_user_compiler` is the one place every backend (named, registered or a user
    callable) is called from (2.13). Returns the function that restores the original.
    """
    from torch._dynamo.output_graph import OutputGraph

    original = OutputGraph._call_user_compiler

    def patched(self: Any, gm: Any, example_inputs: Any) -> Any:
        return wrapper(original, self, gm, example_inputs)

    OutputGraph._call_user_compiler = patched  # type: ignore[method-assign]

    def restore() -> None:
        OutputGraph._call_user_compiler = original  # type: ignore[method-assign]

    return restore


def patch_inductor_inner_compile(wrapper: Callable[..., Any]) -> Callable[[], None]:
    """Route the graphs AOTAutograd hands Inductor through `wrapper(original, gm, inputs, **kw)`.

    `compile_fx_inner` looks `_compile_fx_inner` up as a module global at call time (2.13), the
    same seam torch's own after-AOT minifier wraps.
    """
    from torch._inductor import compile_fx

    original = compile_fx._compile_fx_inner

    def patched(gm: Any, example_inputs: Any, *args: Any, **kwargs: Any) -> Any:
        return wrapper(original, gm, example_inputs, *args, **kwargs)

    compile_fx._compile_fx_inner = patched  # type: ignore[assignment]

    def restore() -> None:
        compile_fx._compile_fx_inner = original  # type: ignore[assignment]

    return restore


def patch_aot_compilers(wrapper: Callable[..., Any]) -> Callable[[], None]:
    """Route every graph an `aot_autograd` backend (Inductor, `aot_eager`, a user's
    `aot_autograd(fw_compiler=..., bw_compiler=...)`) compiles after AOT through
    `wrapper(kind, original_compiler, gm, example_inputs)`, `kind` being "forward", "inference" or "backward".

    `AotAutograd.__call__` hands its kwargs (`fw_compiler`, `inference_compiler`, `bw_compiler`) to
    `aot_module_simplified`, which it looks up as a module global of `torch._dynamo.backends.common`
    at call time (2.13). AOTAutograd calls the backward compiler with the partitioned backward graph
    and its (fake) inputs lazily, at the first `backward()` with the forward's compile context
    restored, or at once when it saves SymInts. Inductor's compilers are `SerializableAOTDispatchCompiler`s:
    the wrapped ones stay so, which AOTAutograd's cache requires. Returns the function that restores.
    """
    from torch._dynamo.backends import common
    from torch._functorch._aot_autograd.schemas import SerializableAOTDispatchCompiler

    original = common.aot_module_simplified

    def wrapped(kind: str, compiler: Any) -> Any:
        if isinstance(compiler, SerializableAOTDispatchCompiler):
            inner = compiler.compiler_fn
            return SerializableAOTDispatchCompiler(compiler.output_code_ty,
                                                   lambda gm, inputs: wrapper(kind, inner, gm, inputs))
        return lambda gm, inputs: wrapper(kind, compiler, gm, inputs)

    def patched(gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
        forward = kwargs.get("fw_compiler")
        for key, kind in (("fw_compiler", "forward"), ("inference_compiler", "inference"), ("bw_compiler", "backward")):
            compiler = kwargs.get(key) or forward  # aot_autograd's own default for the other two
            if compiler is not None:
                kwargs[key] = wrapped(kind, compiler)
        return original(gm, example_inputs, **kwargs)

    common.aot_module_simplified = patched  # type: ignore[assignment]

    def restore() -> None:
        common.aot_module_simplified = original  # type: ignore[assignment]

    return restore


def backend_chain(compiler_fn: Any) -> list[Any]:
    """The wrappers Dynamo puts around a backend, outermost first (WrapBackendDebug,
    _TorchCompileWrapper / _TorchCompileInductorWrapper, the user's callable) (2.13)."""
    chain: list[Any] = []
    while compiler_fn is not None and len(chain) < 8:
        chain.append(compiler_fn)
        compiler_fn = (getattr(compiler_fn, "_torchdynamo_orig_backend", None)
                       or getattr(compiler_fn, "compiler_fn", None))
    return chain


def registered_backends() -> dict[str, Any]:
    """Registered backend name -> compiler function (2.13)."""
    from torch._dynamo.backends import registry

    registry._lazy_import()
    return dict(registry._COMPILER_FNS)


def current_compile_id() -> str | None:
    """The compile id of what Dynamo compiles now, unique in the process: torch's (`CompileContext`, 2.11,
    2.13) in the reset generation `count_dynamo_resets` has counted (`0/0@1`, `CompileId.generation`)."""
    from torch._guards import CompileContext

    compile_id = CompileContext.current_compile_id()
    if compile_id is None:
        return None
    try:
        return str(CompileId.parse(str(compile_id)).in_generation(_resets))
    except ValueError:  # a compiled-autograd graph of no frame (`!0`): no frame ids to restart
        return str(compile_id)


_resets = 0  # the `torch._dynamo.reset()` calls `count_dynamo_resets` saw in this process


def count_dynamo_resets() -> Callable[[], None]:
    """Count the process's `torch._dynamo.reset()` calls, which restart torch's compile ids, so that
    `current_compile_id` tells the compiles after one from those before, and mark each in the structured
    trace (an artifact named `RESET_ARTIFACT`), where the trace reader counts the same resets.

    Wraps the module attribute `torch._dynamo.reset`, which `torch.compiler.reset` calls too (2.11, 2.13):
    install it as `torch._dynamo` is imported, before the script can take the function itself. Returns the
    function that restores the original.
    """
    import torch._dynamo
    from torch._logging import trace_structured

    original = torch._dynamo.reset

    @functools.wraps(original)
    def reset() -> None:
        global _resets
        original()
        _resets += 1
        trace_structured("artifact", metadata_fn=lambda: {"name": RESET_ARTIFACT, "encoding": "string"},
                         payload_fn=lambda: str(_resets))

    torch._dynamo.reset = reset

    def restore() -> None:
        torch._dynamo.reset = original

    return restore


def symint_hint(value: Any) -> int:
    """A SymInt's concrete example value without adding a guard (2.13: `node.hint`)."""
    hint = getattr(getattr(value, "node", None), "hint", None)
    return int(hint) if hint is not None else int(value)


def is_zero_tensor(value: Any) -> bool:
    """A ZeroTensor (autograd's efficient zeros: `Tensor._is_zerotensor`, 2.13; the repro rebuilds one
    with `torch._efficientzerotensor`). False for what has no such method (a fake tensor's answer is its own)."""
    try:
        return bool(value._is_zerotensor())
    except Exception:
        return False


def judgeable(inputs: Any) -> bool:
    """Whether a compiled graph's call on `inputs` can be judged against eager: real tensors, no dispatch mode
    active. torch.export traces a `torch.cond`'s branches through `torch.compile` under its fake and
    functional modes (`_hop_compile_and_call`, 2.13): eager runs there would be traced into the user's program,
    and `same` refuses fake tensors."""
    from torch._subclasses.fake_tensor import is_fake
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return not _get_current_dispatch_mode_stack() and not any(is_fake(value) for value in inputs)


def config_lines() -> tuple[str, ...]:
    """Inductor and Dynamo config as code lines (`codegen_config`, 2.13), the keys `observe.config_diff` reports alone:
    not pt2doctor's own settings (`OWN_SETTINGS`: the autotuning caches a diagnosis's later runs turn off put four
    lines of pt2doctor's into the user's repro.py), nor a key torch's own `config.patch` left marked at its default
    (`deterministic = False` in every recorded repro)."""
    import torch._dynamo.config as dynamo_config
    import torch._inductor.config as inductor_config

    from pt2doctor.capture.torch_compat.observe import config_diff

    reported = config_diff()
    lines = []
    for module, name in ((inductor_config, "torch._inductor.config"), (dynamo_config, "torch._dynamo.config")):
        body = [line for line in module.codegen_config().splitlines() if line.split(" = ", 1)[0] in reported]
        if body:
            lines += [f"import {name}", *body]
    return tuple(lines)


def qualified_name(target: Any) -> str:
    """`torch.relu`, `aten.relu.default`, `operator.add`: how FX names a call target (2.13)."""
    from torch.fx.node import _get_qualified_name

    if isinstance(target, str):
        return target
    try:
        return _get_qualified_name(target).removeprefix("torch.ops.")
    except Exception:
        return str(target)


def unwrap_backend_exception(exc: BaseException) -> BaseException:
    """The backend's own exception inside BackendCompilerFailed / InductorError (2.13)."""
    while getattr(exc, "inner_exception", None) is not None:
        exc = exc.inner_exception  # type: ignore[attr-defined]
    return exc


def failed_compiles() -> list[tuple[str, str]]:
    """(type, reason) of each compile that failed in this process since `forget_compiles`, oldest first: forward graphs
    and the backward graphs AOTAutograd compiles at `backward()` alike, whether the program caught the failure or not.
    Dynamo's compilation metrics (`torch._dynamo.utils.get_compilation_metrics`), the records the trace's
    `compilation_metrics` / `bwd_compilation_metrics` events are written from, and their `fail_type` / `fail_reason`
    (2.11, 2.13)."""
    from torch._dynamo.utils import get_compilation_metrics

    return [(m.fail_type, m.fail_reason or "") for m in get_compilation_metrics()
            if m.fail_type and not getattr(m, "is_runtime", False)]


def forget_compiles() -> None:
    from torch._dynamo.utils import clear_compilation_metrics

    clear_compilation_metrics()


def autotune_anew_as_own() -> None:
    """`warm.autotune_anew` in a run of the program, its keys marked pt2doctor's (`observe.OWN_SETTINGS`): not the
    user's settings, neither in an issue's config nor in a recorded graph's config lines."""
    import torch._inductor.config as inductor_config

    from pt2doctor.capture.torch_compat.observe import OWN_SETTINGS
    from pt2doctor.capture.torch_compat.warm import AUTOTUNE_ANEW_KEYS, autotune_anew

    autotune_anew()  # in a run forked from a fresh-forks server, done there already: the keys are marked all the same
    OWN_SETTINGS.update(f"torch._inductor.config.{key}" for key in AUTOTUNE_ANEW_KEYS
                        if hasattr(inductor_config, key) and not inductor_config._is_default(key))


def disable_aot_autograd_cache() -> Callable[[], None]:
    """Turn AOTAutograd's cache off (`torch._functorch.config.enable_autograd_cache`, 2.11, 2.13);
    returns the restore. A cache hit skips Inductor's inner compile, so the after-AOT graph would
    never be seen by `patch_inductor_inner_compile`."""
    import torch._functorch.config as functorch_config

    from pt2doctor.capture.torch_compat.observe import OWN_SETTINGS

    key = "torch._functorch.config.enable_autograd_cache"
    previous = functorch_config.enable_autograd_cache
    functorch_config.enable_autograd_cache = False
    OWN_SETTINGS.add(key)

    def restore() -> None:
        functorch_config.enable_autograd_cache = previous
        OWN_SETTINGS.discard(key)

    return restore


def aot_cache_hits() -> int:
    """How many graphs AOTAutograd's cache served in this process so far
    (`torch._dynamo.utils.counters["aot_autograd"]["autograd_cache_hit"]`, 2.11, 2.13, 2.14); 0 where torch keeps no
    such count."""
    from torch._dynamo.utils import counters

    return int(counters.get("aot_autograd", {}).get("autograd_cache_hit", 0))


def cuda_fork_poisoned() -> bool:
    """In a forked child: whether torch marked it a "bad fork" that cannot use CUDA (its parent had
    touched the CUDA driver): `torch.cuda._is_in_bad_fork` (2.11, 2.13; False on CPU builds)."""
    import torch.cuda

    return bool(torch.cuda._is_in_bad_fork())


def config_checkpoint() -> Callable[[], None]:
    """Snapshot Dynamo's, AOTAutograd's and Inductor's configs; the returned function restores
    them (`get_config_copy` / `load_config`, 2.11, 2.13), silencing the deprecation warnings that
    re-setting retired keys gives."""
    import warnings

    import torch._dynamo.config
    import torch._functorch.config
    import torch._inductor.config

    saved = [(m, m.get_config_copy()) for m in (torch._dynamo.config, torch._functorch.config, torch._inductor.config)]

    def restore() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for module, copy in saved:
                module.load_config(copy)

    return restore


def state_checkpoint() -> Callable[[], None]:
    """`config_checkpoint`, plus what a script run in a reused interpreter may change in torch beyond
    its configs: `torch.compile` and the export seams (a run's `Overrides` replace them,
    `export.seams_checkpoint`), the compiler stance (`set_stance`:
    compilation off stays off for every later `torch.compile` otherwise), the default dtype and grad
    mode. The interpreter is assumed to be at the default stance when this is called."""
    import torch

    from pt2doctor.capture.torch_compat.export import seams_checkpoint

    restore_configs, restore_seams = config_checkpoint(), seams_checkpoint()
    compile_fn, dtype, grad = torch.compile, torch.get_default_dtype(), torch.is_grad_enabled()

    def restore() -> None:
        restore_configs()
        restore_seams()
        torch.compile = compile_fn  # type: ignore[assignment]
        torch.compiler.set_stance("default")
        torch.set_default_dtype(dtype)
        torch.set_grad_enabled(grad)

    return restore


def accuracy_rule_source() -> str:
    """The text of `torch_compat/accuracy_rule.py`, which every repro embeds verbatim (reduce.repro)."""
    import inspect

    from pt2doctor.capture.torch_compat import accuracy_rule

    return inspect.getsource(accuracy_rule)


def node_example_value(node: Any) -> Any:
    """The fake value Dynamo attached to an FX node (`meta["example_value"]`, 2.13), or `meta["val"]`."""
    return node.meta.get("example_value", node.meta.get("val"))


def register_inductor_prims() -> None:
    """Register Inductor's random prims (`prims.inductor_seeds`, `inductor_lookup_seed`,
    `inductor_random`, ...), which an after-AOT graph with dropout calls; they exist only once
    `torch._inductor.inductor_prims` is imported (2.11, 2.13). Repros import it themselves."""
    import torch._inductor.inductor_prims  # noqa: F401


def inductor_prim_calls() -> tuple[str, ...]:
    """How a graph's code calls each prim that exists only once `torch._inductor.inductor_prims` is
    imported (`torch.ops.prims.inductor_seeds`, `torch.ops.prims._low_memory_max_pool_offsets_to_indices`
    that Inductor's max-pool backward uses, ...): the module's op objects (2.13)."""
    import torch
    from torch._inductor import inductor_prims

    names = {op.name() if isinstance(op, torch._ops.OpOverload) else op._qualified_op_name
             for op in vars(inductor_prims).values()
             if isinstance(op, (torch._ops.OpOverload, torch._ops.OpOverloadPacket))}
    return tuple(sorted("torch.ops." + name.replace("::", ".") for name in names))


def aot_autograd_kwargs(backend: Any) -> dict[str, Any] | None:
    """An `aot_autograd(**kwargs)` backend's kwargs as the user gave them, else None (2.13).

    `AotAutograd.__call__` replaces `bw_compiler` with a wrapper on its first graph
    (`_wrapped_bw_compiler`, flagged `_is_wrapped_bw_compiler`, the user's in its closure) and may
    replace a callable `decompositions` with its result; the user's compiler is read back out.
    """
    import inspect

    from torch._dynamo.backends.common import AotAutograd

    if not isinstance(backend, AotAutograd):
        return None
    kwargs = dict(backend.kwargs)
    bw = kwargs.get("bw_compiler")
    if bw is not None and getattr(bw, "_is_wrapped_bw_compiler", False):
        inner = inspect.getclosurevars(bw).nonlocals.get("bw_compiler_fn")
        if inner is not None:
            kwargs["bw_compiler"] = inner
    if kwargs.get("bw_compiler") is kwargs.get("fw_compiler"):
        kwargs.pop("bw_compiler")  # aot_autograd's own default: the forward compiler
    return kwargs

"""Every private torch API pt2doctor touches, in one place, with the versions it was checked on.

Contract: the rest of pt2doctor imports torch internals only through this module. Each function
says which torch versions it was checked on; when a later torch moves something, the fix is here.
Checked on: torch 2.13.0 (CPU, this repo's CI) and 2.11 (CUDA, the lent GPU machine).
Functions are grouped by the pt2doctor subsystem that needs them; new groups are appended.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any, Callable


# --- structured trace (capture.watch) ---------------------------------------------------------

def trace_logger() -> logging.Logger:
    """The `torch.__trace` logger that TORCH_TRACE writes through (2.11, 2.13)."""
    from torch._logging import _internal

    return _internal.trace_log


def trace_formatter() -> logging.Formatter:
    """The formatter TORCH_TRACE uses, so in-process capture writes the same line format."""
    from torch._logging._internal import TorchLogsFormatter

    return TorchLogsFormatter(trace=True)


def dynamo_explain(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`torch._dynamo.explain(fn)` -> callable returning ExplainOutput (2.11, 2.13)."""
    import torch._dynamo

    return torch._dynamo.explain(fn)


def config_diff() -> dict[str, str]:
    """Non-default `torch._dynamo` / `torch._inductor` / `torch._functorch` config, as `name -> repr`.

    Uses ConfigModule's `_config` entries and `_is_default` (2.11, 2.13), skipping aliases (they
    mirror another key), deprecated keys and keys holding their default value. Modules never imported are skipped: importing Inductor
    only to report its config would cost seconds.
    """
    import sys
    import warnings

    diff: dict[str, str] = {}
    for name in ("torch._dynamo.config", "torch._inductor.config", "torch._functorch.config"):
        module = sys.modules.get(name)
        entries = getattr(module, "_config", None)
        is_default = getattr(module, "_is_default", None)
        if not isinstance(entries, dict) or is_default is None:
            continue
        for key, entry in entries.items():
            if getattr(entry, "alias", None) is not None or getattr(entry, "deprecated", False):
                continue
            try:
                if is_default(key):
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    value = getattr(module, key)
            except Exception:
                continue
            if not callable(value) and not _equals_default(value, entry):
                diff[f"{name}.{key}"] = repr(value)
    return diff


def _equals_default(value: Any, entry: Any) -> bool:
    """Torch's own `config.patch(...)` contexts mark a key overridden even when they set its default
    again (2.13: `deterministic`, `inplace_buffers`, ...): compare values too."""
    try:
        return bool(value == getattr(entry, "default", object()))
    except Exception:
        return False


def reset_dynamo() -> None:
    import torch._dynamo

    torch._dynamo.reset()


# --- advisor: in-process watch, CompileProfiler, what-if overrides (api/, capture/overrides.py) ---

def interned_strings() -> dict[str, int]:
    """Structured tracing's string intern table, `text -> id` (`torch._logging.structured.INTERN_TABLE`, 2.13).

    Strings are interned once per process; a watch that starts later must re-emit them so stacks resolve.
    """
    from torch._logging import structured

    return dict(getattr(structured, "INTERN_TABLE", {}))


def dynamo_config() -> Any:
    """`torch._dynamo.config` (a ConfigModule: `patch`, attribute get/set) (2.11, 2.13)."""
    import torch._dynamo.config

    return torch._dynamo.config


def config_module(name: str) -> Any:
    """A torch config module by short name: dynamo, inductor, compiler (`torch.compiler.config`) (2.13)."""
    import importlib

    modules = {"dynamo": "torch._dynamo.config", "inductor": "torch._inductor.config",
               "compiler": "torch.compiler.config", "functorch": "torch._functorch.config"}
    return importlib.import_module(modules[name])


def patch_torch_compile(extra_kwargs: dict[str, Any], on_compiled: Callable[[Any], Any] | None = None) -> None:
    """Replace `torch.compile` so every call gets `extra_kwargs` (overriding the script's own), and pass
    each compiled callable through `on_compiled`. Only the what-if child calls this, before the script
    runs; torch has no supported seam for "compile everything with dynamic=True" (2.13).
    """
    import functools

    import torch

    original = torch.compile

    def _finish(compiled: Any) -> Any:
        return on_compiled(compiled) if on_compiled is not None else compiled

    @functools.wraps(original)
    def compile(model: Any = None, **kwargs: Any) -> Any:
        kwargs.update(extra_kwargs)
        if model is None:  # used as `@torch.compile(...)`
            return lambda fn: _finish(original(fn, **kwargs))
        return _finish(original(model, **kwargs))

    torch.compile = compile  # type: ignore[assignment]


# --- graph recording and minification (capture.graph_recorder, reduce) ------------------------

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


def backend_chain(compiler_fn: Any) -> list[Any]:
    """The wrappers Dynamo puts around a backend, outermost first (WrapBackendDebug,
    _TorchCompileWrapper / _TorchCompileInductorWrapper, the user's callable) (2.13)."""
    chain = []
    while compiler_fn is not None and len(chain) < 8:
        chain.append(compiler_fn)
        compiler_fn = getattr(compiler_fn, "_torchdynamo_orig_backend", None) or getattr(compiler_fn, "compiler_fn", None)
    return chain


def registered_backends() -> dict[str, Any]:
    """Registered backend name -> compiler function (2.13)."""
    from torch._dynamo.backends import registry

    registry._lazy_import()
    return dict(registry._COMPILER_FNS)


def current_compile_id() -> str | None:
    from torch._guards import CompileContext

    compile_id = CompileContext.current_compile_id()
    return None if compile_id is None else str(compile_id)


def symint_hint(value: Any) -> int:
    """A SymInt's concrete example value without adding a guard (2.13: `node.hint`)."""
    hint = getattr(getattr(value, "node", None), "hint", None)
    return int(hint) if hint is not None else int(value)


def fx_module_source(gm: Any) -> str:
    """Import block plus `forward` code of an FX graph module, as torch's own pickling writes it
    (`torch.fx.graph_module._format_import_block`, 2.13)."""
    from torch.fx.graph_module import _format_import_block
    from torch.package import sys_importer

    python = gm.graph.python_code(root_module="self")
    return _format_import_block(python.globals, sys_importer) + "\n" + python.src


def config_lines() -> tuple[str, ...]:
    """Non-default Inductor and Dynamo config as code lines (`codegen_config`, 2.13)."""
    import torch._dynamo.config as dynamo_config
    import torch._inductor.config as inductor_config

    lines = []
    for module, name in ((inductor_config, "torch._inductor.config"), (dynamo_config, "torch._dynamo.config")):
        body = [line for line in module.codegen_config().splitlines() if line.strip()]
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


def disable_aot_autograd_cache() -> Callable[[], None]:
    """Turn AOTAutograd's cache off (`torch._functorch.config.enable_autograd_cache`, 2.11, 2.13);
    returns the restore. A cache hit skips Inductor's inner compile, so the after-AOT graph would
    never be seen by `patch_inductor_inner_compile`."""
    import torch._functorch.config as functorch_config

    previous = functorch_config.enable_autograd_cache
    functorch_config.enable_autograd_cache = False

    def restore() -> None:
        functorch_config.enable_autograd_cache = previous

    return restore


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


# --- accuracy (capture.accuracy_probe) ------------------------------------------------------------

def same_as_fp64_reference(expected: Any, actual: Any, reference: Any, tolerance: float) -> bool:
    """PyTorch's accuracy rule (`same_two_models` semantics): allclose, else RMSE(actual, fp64) within
    a dtype-dependent multiple of RMSE(expected, fp64) (`torch._dynamo.utils.same`, 2.13).

    The same call, with the same keywords, as `same_as_fp64_reference` in the minifier's repro
    template (`reduce/repro.py`), which must stay torch-only and so cannot import this one: the two
    judge a graph identically. Errors are not logged (the probe asks per node).
    """
    from torch._dynamo.utils import same

    return bool(same(expected, actual, reference, tol=tolerance, equal_nan=True, ignore_non_fp=True,
                     log_error=lambda *args, **kwargs: None))


def clone_input(value: Any) -> Any:
    """A copy of a tensor with the same size, strides and storage offset (`torch._dynamo.utils.clone_input`,
    2.13), so a compiled graph that assumed the strides runs on it; non-tensors as they are."""
    import torch
    from torch._dynamo.utils import clone_input as _clone

    if not isinstance(value, torch.Tensor):
        return value
    return _clone(value.detach()).requires_grad_(value.requires_grad and value.is_floating_point())


def node_example_value(node: Any) -> Any:
    """The fake value Dynamo attached to an FX node (`meta["example_value"]`, 2.13), or `meta["val"]`."""
    return node.meta.get("example_value", node.meta.get("val"))


# --- diagnose: the compiler bisector (diagnose.bisect_child) -------------------------------------

def compiler_bisector() -> Any | None:
    """`torch._inductor.compiler_bisector.CompilerBisector` (torch >= 2.6), or None when absent."""
    try:
        from torch._inductor.compiler_bisector import CompilerBisector
    except ImportError:
        return None
    return CompilerBisector


def compile_every_time() -> None:
    """Caches off and compiles in-process, so each query really lowers and codegens (and a forked
    query starts no compile-worker threads)."""
    import torch._inductor.config as inductor_config

    for name, value in (("fx_graph_cache", False), ("fx_graph_remote_cache", False),
                        ("autotune_local_cache", False), ("compile_threads", 1)):
        if hasattr(inductor_config, name):
            setattr(inductor_config, name, value)
    functorch_config = config_module("functorch")
    if hasattr(functorch_config, "enable_autograd_cache"):
        functorch_config.enable_autograd_cache = False


def bisector_subsystems(backend: str) -> list[tuple[str, dict[str, Any] | None]]:
    """The subsystems `CompilerBisector` knows for `backend`, in its order: (name, None) for one it
    bisects by counting applications, (name, {config_field: value}) for a config change."""
    from torch._inductor import compiler_bisector

    out: list[tuple[str, dict[str, Any] | None]] = []
    for subsystem in compiler_bisector.BACKENDS.get(backend, []):
        change = getattr(subsystem, "config_field", None)
        out.append((subsystem.name, {change: subsystem.config_value} if change else None))
    return out


def install_bisect_policy(disable: Callable[[str, str, Any], bool],
                          config_change: Callable[[str], dict[str, Any] | None]) -> None:
    """Answer the bisector's hooks in this process: every `CompilerBisector.disable_subsystem(backend,
    subsystem, debug_info)` call site in Dynamo/AOT/Inductor asks `disable`, and the backends' config
    look-ups ask `config_change`. Only for a forked query process: it replaces class attributes."""
    bisector = compiler_bisector()
    bisector.disable_subsystem = classmethod(lambda cls, backend, subsystem, debug_info=None:
                                             disable(backend, subsystem, debug_info))
    bisector.get_config_change = classmethod(lambda cls, config_name: config_change(config_name))


# --- diagnose: frame recordings (capture.frame_recorder) -----------------------------------------

def patch_dynamo_exception_handler(wrapper: Callable[..., Any]) -> None:
    """Route `convert_frame.exception_handler(e, code, frame, export=...)`, which `_compile` calls when
    a frame fails to compile (2.11, 2.13), through `wrapper(original, e, code, frame, export)`. The
    frame (`f_code`, `f_locals` at entry, `f_globals`, `closure`) is what a replay needs."""
    from torch._dynamo import convert_frame

    original = convert_frame.exception_handler

    def patched(e: Exception, code: Any, frame: Any = None, export: bool = False) -> None:
        return wrapper(original, e, code, frame, export)

    convert_frame.exception_handler = patched


def is_graph_break(exc: BaseException) -> bool:
    from torch._dynamo.exc import Unsupported

    return isinstance(exc, Unsupported)



# --- warm processes (reduce.zygote, reduce.verify) -----------------------------------------------

def prewarm_inductor() -> None:
    """Import Inductor, and where no GPU is visible run its CPU vector-ISA probe (2.11, 2.13).

    `valid_vec_isa_list()` checks each ISA the CPU claims, one after the other: it builds a test
    library (cached on disk) and dlopens it in a child process, which loads libtorch_cpu (~0.45 s
    per ISA on x86 with the cache warm, so ~1.4 s for avx2/avx512/avx512_vnni; tens of seconds
    cold). Its answer is a fact about the machine that every Inductor compile on CPU computes
    first, so running it early changes when, not what. Here each claimed ISA's check (`bool(isa)`,
    cached per ISA object by torch) runs in a thread of its own while this thread imports
    Inductor's compiler, so the children load on other cores; `valid_vec_isa_list()` then reads the
    cached answers. What the checks import lazily is imported first, so no thread imports a module
    while another does. Where anything here differs in a later torch, the list is just computed
    the ordinary way. Where a GPU is visible the repro most likely runs there and never asks, so
    the probe is not run.
    Self-contained: its source also runs in the verifying interpreter, which imports nothing of
    pt2doctor. Never raises.
    """
    try:
        import platform
        import threading

        import torch

        probe = not torch.cuda.is_available()
        isas: list[object] = []
        if probe and platform.machine() in ("x86_64", "AMD64"):
            try:
                import torch._inductor.codecache  # noqa: F401 - what the checks import, before any thread
                import torch.utils.cpp_extension  # noqa: F401
                from torch._inductor import cpu_vec_isa

                claimed = cpu_vec_isa.x86_isa_checker()
                isas = [isa for isa in cpu_vec_isa.supported_vec_isa_list
                        if all(flag in claimed for flag in str(isa).split())]
            except Exception:  # not this torch's layout: `valid_vec_isa_list()` below does it all
                isas = []

        def check(isa: object) -> None:
            try:
                bool(isa)
            except Exception:
                pass

        threads = [threading.Thread(target=check, args=(isa,), daemon=True) for isa in isas]
        for thread in threads:
            thread.start()
        import torch._inductor.compile_fx  # noqa: F401
        for thread in threads:
            thread.join()
        if probe:
            from torch._inductor.cpu_vec_isa import valid_vec_isa_list

            valid_vec_isa_list()
    except Exception:
        pass


def prewarm_inductor_source() -> str:
    """The source a fresh interpreter runs to call `prewarm_inductor` (reduce.verify)."""
    return inspect.getsource(prewarm_inductor) + "\nprewarm_inductor()\n"

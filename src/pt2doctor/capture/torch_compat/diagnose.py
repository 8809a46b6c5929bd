"""Private torch APIs for `diagnose`: the compiler bisector (bisect.child) and frame
recordings (capture.child.frame_recorder). See the package contract in `torch_compat/__init__.py`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pt2doctor.capture.torch_compat.observe import config_module
from pt2doctor.capture.torch_compat.warm import autotune_anew


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

    autotune_anew()
    for name, value in (("fx_graph_cache", False), ("fx_graph_remote_cache", False), ("compile_threads", 1)):
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
    assert bisector is not None, "install_bisect_policy needs a torch with CompilerBisector"
    bisector.disable_subsystem = classmethod(lambda cls, backend, subsystem, debug_info=None:
                                             disable(backend, subsystem, debug_info))
    bisector.get_config_change = classmethod(lambda cls, config_name: config_change(config_name))


def patch_dynamo_exception_handler(wrapper: Callable[..., Any]) -> None:
    """Route `convert_frame.exception_handler(e, code, frame, export=...)`, which `_compile` calls when
    a frame fails to compile (2.11, 2.13), through `wrapper(original, e, code, frame, export)`. The
    frame (`f_code`, `f_locals` at entry, `f_globals`, `closure`) is what a replay needs."""
    from torch._dynamo import convert_frame

    original = convert_frame.exception_handler

    def patched(e: Exception, code: Any, frame: Any = None, export: bool = False) -> None:
        return wrapper(original, e, code, frame, export)

    convert_frame.exception_handler = patched


def compile_dynamic() -> bool | None:
    """The `dynamic=` of the torch.compile now compiling, as Dynamo's config holds it during the compile
    (torch.compile patches it): True (`assume_static_by_default` off), False (`automatic_dynamic_shapes`
    off), None (the default: static first, dynamic after a change)."""
    import torch._dynamo.config as config

    if not config.assume_static_by_default:
        return True
    return None if config.automatic_dynamic_shapes else False


def is_graph_break(exc: BaseException) -> bool:
    from torch._dynamo.exc import Unsupported

    return isinstance(exc, Unsupported)

"""Private torch APIs for warming fresh interpreters up (processes.zygote, processes.fresh). See the
package contract in `torch_compat/__init__.py`."""

from __future__ import annotations

import inspect
from contextlib import suppress


def prewarm_inductor() -> None:
    """Import Inductor, and where no GPU is visible run its CPU vector-ISA probe (2.11, 2.13).

    `valid_vec_isa_list()` checks each ISA the CPU claims, one after the other: it builds a test
    library (cached on disk) and dlopens it in a child process, which loads libtorch_cpu (about half
    a second per ISA warm, far more cold: docs/design/minifier.md). Its answer is a fact about the machine that every
    Inductor compile on CPU computes first, so running it early changes when, not what. Here each claimed ISA's check
    (`bool(isa)`, cached per ISA object by torch) runs in a thread of its own while this thread imports
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
            with suppress(Exception):
                bool(isa)

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
    """The source a fresh interpreter runs to call `prewarm_inductor` (processes.fresh)."""
    return inspect.getsource(prewarm_inductor) + "\nprewarm_inductor()\n"


def autotune_anew() -> None:
    """No autotuning result is read from a cache or written to one, here or remotely (2.11, 2.13): every kernel this
    interpreter compiles is autotuned under its own eye, as on a machine that never ran it (Triton's configs,
    coordinate descent, max-autotune's choices: `autotune_local_cache` and `autotune_remote_cache` cover them all).
    Which block size the autotuner picked can decide a failure: an autotuner's trial launch may be the one that writes
    out of bounds, and a later run that reads the choice never launches it. Self-contained (its source is run by
    fresh interpreters: `autotune_anew_source`); a torch without these settings is left as it is.
    The bundled remote cache is read only with the local one on, so it is turned off only where the user turned it
    on: it is in the key of Inductor's FX graph cache (the other two are not), and setting it from its default made
    every whole-program run of a diagnosis miss the graphs the user's own runs had cached (a warm 5 s run took 20)."""
    try:
        import torch._inductor.config as inductor_config
    except Exception:
        return
    for name in ("autotune_local_cache", "autotune_remote_cache"):
        if hasattr(inductor_config, name):
            setattr(inductor_config, name, False)
    if getattr(inductor_config, "bundled_autotune_remote_cache", None):
        inductor_config.bundled_autotune_remote_cache = False


# The keys `autotune_anew` may set (spelled out in it too: its source runs alone, `autotune_anew_source`).
AUTOTUNE_ANEW_KEYS = ("autotune_local_cache", "autotune_remote_cache", "bundled_autotune_remote_cache")


def autotune_anew_source() -> str:
    """The source a fresh interpreter runs to call `autotune_anew` (processes.fresh, processes.fresh_forks)."""
    return inspect.getsource(autotune_anew) + "\nautotune_anew()\n"


def import_dynamo() -> None:
    """Import `torch._dynamo` (2.11, 2.13): a parent about to fork a zygote imports it once, so every
    forked child inherits it instead of importing it again."""
    import torch._dynamo  # noqa: F401


def compile_tiny_graph(device: str = "cpu") -> None:
    """Compile a two-op aten graph with Inductor's `compile_fx_inner` on `device` (2.11, 2.13), one
    compile thread: what the first real compile would pay (imports, on a GPU the CUDA context and
    Triton's first compile) paid up front."""
    import torch
    import torch._dynamo  # noqa: F401 - what every candidate needs, imported with the rest
    import torch._inductor.config as inductor_config
    import torch.fx
    from torch._inductor.compile_fx import compile_fx_inner

    inductor_config.compile_threads = 1
    aten = torch.ops.aten
    graph = torch.fx.symbolic_trace(lambda x: (aten.sin.default(aten.mul.Tensor(x, 2)),))
    compile_fx_inner(graph, [torch.randn(8, device=device)])


def logs_from_env() -> None:
    """Set torch's logging up again from this process's environment, as `import torch` does (2.11, 2.13): a process
    forked after the import and given another environment (`TORCH_TRACE`, `TORCH_LOGS`) then logs as one that
    imported torch in it. The trace's handler is made anew (the inherited one names no directory, or the server's).
    Self-contained (its source runs in the forking server: `processes.fresh_forks`); a torch that sets logging up
    otherwise is left as it is."""
    try:
        import torch._logging._internal as internal

        internal.LOG_TRACE_HANDLER = None
        internal._init_logs()
    except Exception:
        pass


def logs_from_env_source() -> str:
    """The source of `logs_from_env`, defined, not called (processes.fresh_forks calls it in each program's fork)."""
    return inspect.getsource(logs_from_env)

"""Private torch APIs for runtime triage: Inductor's debug config, each kernel's origin FX nodes, and the
kernels of a compiled graph's output code (`capture.child.kernel_check`). See the package contract in
`torch_compat/__init__.py`.

Checked on torch 2.13.0 (CPU; the Triton paths read the same 2.13 source). Kernel -> FX nodes:
Inductor's provenance tracking (`config.trace.provenance_tracking_level = 1`) fills
`torch._inductor.debug._inductor_triton_kernel_to_post_grad_node_info` ({"<kernel>:<handle>": [post-grad
node names]}) for C++ and Triton kernels alike, as each kernel is code-generated
(`set_kernel_post_grad_provenance_tracing`, called from `codegen/cpp.py` and `codegen/triton.py`).
`compile_fx` resets that global around each whole compile (`reset_provenance_globals`), so it is read
inside `_compile_fx_inner`, right after it returns. The output code comments (`# Source node to ATen node
mapping`) are written for Triton kernels only, which is why they are not what is read. A codegen that
reuses a cached graph writes nothing: the FX graph cache is off while checking.
The kernels: Inductor's Python wrapper module binds each kernel to a module global of the kernel's name
(`cpp_fused_div_elu_0 = async_compile.cpp_pybinding(...)`, a callable; `triton_poi_fused_0 =
async_compile.triton(...)`, a `CachingAutotuner` launched through `.run(...)`) that its `call(args)`
looks up at call time; `CompiledFxGraph.current_callable` is that `call` (or a closure around it,
`align_inputs_from_check_idxs`; with graph partitions the bound method `runner.call`), whose `__globals__`
is the module's namespace, where `call` is bound to it (the module deletes its `async_compile` once loaded).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# what the deterministic re-run sets: provenance on, no cached graphs (they skip codegen, hence the
# provenance), no CUDA graphs (a replay launches no kernel through the wrapper), a sync after every kernel
# and around every graph (torch's own troubleshooting steps, docs: torch.compiler_troubleshooting)
_CPU_CONFIG = {"trace.provenance_tracking_level": 1, "fx_graph_cache": False, "triton.cudagraphs": False}
_CUDA_CONFIG = {"triton.debug_sync_kernel": True, "triton.debug_sync_graph": True}


def kernel_debug_config(cuda: bool) -> Callable[[], None]:
    """Set Inductor's config for the checked re-run; returns the function that restores it."""
    from torch._inductor import config

    values = {**_CPU_CONFIG, **(_CUDA_CONFIG if cuda else {})}
    before = {name: getattr(config, name) for name in values}
    for name, value in values.items():
        setattr(config, name, value)

    def restore() -> None:
        for name, value in before.items():
            setattr(config, name, value)

    return restore


def kernel_provenance_keys() -> frozenset[str]:
    """The kernels provenance tracking knows now (`<kernel>:<handle>`): what `kernel_nodes(since=)` leaves out.
    Kernel names restart at `_0` in every graph, and a backward graph compiled lazily, outside `compile_fx`'s
    reset, adds to the same dict: the handles, unique within it, tell one graph's kernels from another's."""
    from torch._inductor import debug

    return frozenset(debug._inductor_triton_kernel_to_post_grad_node_info)


def kernel_nodes(since: frozenset[str] = frozenset()) -> dict[str, tuple[str, ...]]:
    """{kernel name: the post-grad FX node names fused into it} of the kernels code-generated since the keys
    `since` (`kernel_provenance_keys()` before `_compile_fx_inner`); extern kernels (`extern_kernels.mm`) too."""
    from torch._inductor import debug

    found: dict[str, list[str]] = {}
    for key, nodes in dict(debug._inductor_triton_kernel_to_post_grad_node_info).items():
        if key in since:
            continue
        name = str(key).rsplit(":", 1)[0]
        found.setdefault(name, []).extend(n for n in nodes if n not in found.get(name, ()))
    return {name: tuple(nodes) for name, nodes in found.items()}


def output_code_namespace(compiled: Any) -> dict[str, Any] | None:
    """The module namespace of the Python wrapper an Inductor `OutputCode` runs, or None (a C++ wrapper,
    AOTInductor, a callable that hides it)."""
    start = getattr(compiled, "current_callable", None)
    seen: set[int] = set()
    todo = [start]
    while todo:
        fn = todo.pop()
        if fn is None or id(fn) in seen or len(seen) > 16:
            continue
        seen.add(id(fn))
        namespace = getattr(fn, "__globals__", None)
        if isinstance(namespace, dict) and namespace.get("call") == fn:  # the module's own `call` (or `runner.call`)
            return namespace
        cells = getattr(fn, "__closure__", None) or ()
        todo += [getattr(fn, "__wrapped__", None), *(_contents(c) for c in cells if callable(_contents(c)))]
    return None


def _contents(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


def replace_call(compiled: Any, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> bool:
    """Route the `OutputCode`'s calls (`compiled(inputs)`, a list its `call` empties) through `wrap(call)`."""
    current = getattr(compiled, "current_callable", None)
    if current is None:
        return False
    compiled.current_callable = wrap(current)
    return True


def is_triton_launcher(kernel: Any) -> bool:
    """A Triton kernel of the output code: launched through `.run(*args, stream=...)`, not called."""
    return hasattr(kernel, "run")

"""Check every Inductor kernel as the program runs: the first one that faults or makes NaN/Inf (runtime triage).

Contract: `install(spec)` (the child spec's `Hooks.kernel_check`, installed after the graph recorder,
whose after-AOT graph ids it uses) sets Inductor's debug config (`torch_compat.kernel_debug_config`) and
wraps `_compile_fx_inner`. For each graph Inductor compiles it appends one `CompiledKernels` line (each
kernel and its fused FX nodes with their provenance, `model.runtime`), then routes the output code's
calls and kernel launches through checks:
- before a kernel runs, the marker `kernels/inflight` names it (`g0003 2 cpp_fused_div_elu_0 run`; `done`
  once it returned): a process that dies inside a kernel (a segfault, an abort) still names it;
- with `spec.sync` (CUDA), the device is synchronized after each launch, so an asynchronous error (a
  device-side assert, an illegal address) is raised by its own kernel: a `raised` `KernelEvent`, with
  the index ranges of its indexing nodes computed eagerly on the call's inputs;
- after a kernel returns, each floating-point argument holding NaN/Inf where it held none before is a
  bad output: the graph is run op by op (an FX interpreter, on copies of the call's inputs taken before
  the call, within `spec.clone_budget_bytes`) and the kernel's nodes are compared. NaN where eager has
  no NaN, or Inf where eager is finite, is the compiled kernel's own (`eager="finite"`): a
  `nonfinite` event is written and checking stops (what follows is its consequence). Non-finite values
  that eager has too are written (`eager="nonfinite"`) and checking goes on.
Each graph's first call also writes the index ranges of its indexing nodes whose index is a graph input
(`IndexCheck`), which a segfault does not let it compute afterwards. Nothing here changes what a kernel
computes; the checks cost a pass over each kernel's arguments, and the copies.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pt2doctor.capture import torch_compat
from pt2doctor.capture.child.index_ranges import index_ranges
from pt2doctor.capture.process_meta import is_user_file
from pt2doctor.model.runtime import (
    KERNELS_DIR,
    MARKER_SIZE,
    BadTensor,
    CompiledKernels,
    FusedKernel,
    IndexCheck,
    KernelCheckSpec,
    KernelEvent,
)
from pt2doctor.model.serialize import append_line


class _Call:
    """One call of a compiled graph: its number, copies of its inputs, its eager values once computed."""

    def __init__(self, number: int, copies: list[Any] | None) -> None:
        self.number = number
        self.copies = copies
        self.ordinal = 0
        self.eager: dict[str, Any] | None = None


class _Graph:
    def __init__(self, graph_id: str, gm: Any, kernels: dict[str, tuple[str, ...]]) -> None:
        self.id = graph_id
        self.gm = gm
        self.kernels = kernels
        self.nodes = {n.name: n for n in gm.graph.nodes}
        self.calls = 0
        self.call: _Call | None = None


class KernelChecker:
    def __init__(self, spec: KernelCheckSpec) -> None:
        self.spec = spec
        self.dir = Path(spec.out) / KERNELS_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        self.compiled = open(self.dir / "compiled.jsonl", "a", buffering=1)  # noqa: SIM115 (close() closes)
        self.events = open(self.dir / "events.jsonl", "a", buffering=1)  # noqa: SIM115 (as above)
        self.ranges = open(self.dir / "ranges.jsonl", "a", buffering=1)  # noqa: SIM115 (as above)
        marker = self.dir / "inflight"
        marker.write_bytes(b" " * MARKER_SIZE)
        self._marker_file = open(marker, "r+b")  # noqa: SIM115 (mapped while checking: close() closes)
        self.marker = mmap.mmap(self._marker_file.fileno(), MARKER_SIZE)
        self.done = False  # a kernel's own NaN/Inf or error was found: what follows is its consequence
        self.unnamed = 0

    def mark(self, text: str) -> None:
        self.marker[:] = text.encode()[:MARKER_SIZE].ljust(MARKER_SIZE)

    def on_inner_compile(self, original: Callable[..., Any], gm: Any, example_inputs: Any, *args: Any,
                         **kwargs: Any) -> Any:
        from pt2doctor.capture.child.graph_modules import graph_copy
        from pt2doctor.capture.child.graph_recorder import last_after_aot_graph

        eager = graph_copy(gm)  # Inductor's passes rewrite gm in place
        known = torch_compat.kernel_provenance_keys()
        compiled = original(gm, example_inputs, *args, **kwargs)
        graph_id = last_after_aot_graph()
        if graph_id is None:
            self.unnamed += 1
            graph_id = f"k{self.unnamed:04d}"
        try:
            self._instrument(graph_id, eager, known, compiled)
        except Exception as exc:  # the program runs on unchecked: the parent reads why
            append_line(self.compiled, CompiledKernels(graph_id, instrumented=False,
                                                       note=f"the kernel checker failed: {type(exc).__name__}: {exc}"))
        return compiled

    def _instrument(self, graph_id: str, eager: Any, known: frozenset[str], compiled: Any) -> None:
        graph = _Graph(graph_id, eager, torch_compat.kernel_nodes(since=known))
        namespace = torch_compat.output_code_namespace(compiled)
        wrapped = [name for name in graph.kernels if namespace is not None and name in namespace]
        for name in wrapped:
            namespace[name] = self._checked(graph, name, namespace[name])  # type: ignore[index]
        if wrapped:
            torch_compat.replace_call(compiled, lambda call: self._graph_call(graph, call))
        note = "" if wrapped else ("no Python wrapper module to instrument (a C++ wrapper?)" if namespace is None
                                   else "no kernel of the output code was found by its name")
        order = {name: i for i, name in enumerate(graph.nodes)}  # graph order: a node unknown here goes last
        ordered = {name: tuple(sorted(nodes, key=lambda n: order.get(n, len(order))))
                   for name, nodes in graph.kernels.items()}
        fused = tuple(FusedKernel(name, nodes, tuple(torch_compat.node_origin(graph.nodes[n], is_user_file)
                                                     for n in nodes if n in graph.nodes))
                      for name, nodes in ordered.items())
        append_line(self.compiled, CompiledKernels(graph_id, fused, instrumented=bool(wrapped), note=note))

    def _graph_call(self, graph: _Graph, call: Callable[..., Any]) -> Callable[..., Any]:
        def run(inputs: list[Any]) -> Any:
            graph.calls += 1
            copies = None if self.done else _quietly(_copies, inputs, self.spec.clone_budget_bytes)
            graph.call = _Call(graph.calls, copies)
            if graph.calls == 1:
                _quietly(self._first_call_ranges, graph, inputs)
            try:
                return call(inputs)
            finally:
                graph.call = None

        return run

    def _first_call_ranges(self, graph: _Graph, inputs: Sequence[Any]) -> None:
        placeholders = {n.name: i for i, n in enumerate(n for n in graph.gm.graph.nodes if n.op == "placeholder")}
        ranges = index_ranges(graph.gm.graph.nodes, lambda node: inputs[placeholders[node.name]]
                              if getattr(node, "name", None) in placeholders and placeholders[node.name] < len(inputs)
                              else None)
        if ranges:
            append_line(self.ranges, IndexCheck(graph.id, ranges))

    def _checked(self, graph: _Graph, name: str, kernel: Any) -> Any:
        def launch(run: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            call = graph.call
            number, ordinal = (call.number, _next(call)) if call else (0, 0)
            if not self.done:
                _quietly(self._null_data, graph, name, number, ordinal, args)
            self.mark(f"{graph.id} {number} {name} run")
            before = None if self.done else _quietly(_nonfinite, args)
            try:
                result = run(*args, **kwargs)
                if self.spec.sync:
                    _synchronize()
            except Exception as exc:
                if not self.done:
                    _quietly(self._raised, graph, name, number, ordinal, exc)
                raise
            self.mark(f"{graph.id} {number} {name} done")
            if before is not None:
                _quietly(self._judge, graph, name, number, ordinal, args, before)
            return result

        if torch_compat.is_triton_launcher(kernel):
            return _Launcher(kernel, launch)
        return lambda *args, **kwargs: launch(kernel, args, kwargs)

    def _null_data(self, graph: _Graph, name: str, number: int, ordinal: int, args: Sequence[Any]) -> None:
        """A tensor argument with elements and no memory (data pointer 0): said before the launch, which may die."""
        import torch

        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor) and a.numel() > 0 and a.data_ptr() == 0:
                what = f"argument {i} ({str(a.dtype).removeprefix('torch.')}{list(a.shape)}) has data pointer 0" + (
                    " (a ZeroTensor, which has no memory)" if torch_compat.is_zero_tensor(a) else "")
                append_line(self.events, KernelEvent(graph.id, name, "null_data", number, ordinal, error=what))
                return

    def _raised(self, graph: _Graph, name: str, number: int, ordinal: int, exc: BaseException) -> None:
        self.done = True
        values = self._eager(graph)
        nodes = [graph.nodes[n] for n in graph.kernels.get(name, ()) if n in graph.nodes]
        ranges = index_ranges(nodes, lambda node: (values or {}).get(getattr(node, "name", "")))
        text = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
        append_line(self.events, KernelEvent(graph.id, name, "raised", number, ordinal,
                                             error=f"{type(exc).__name__}: {text}", index_ranges=ranges))

    def _judge(self, graph: _Graph, name: str, number: int, ordinal: int, args: Sequence[Any],
               before: dict[int, Any]) -> None:
        after = _nonfinite(args)
        bad = [i for i, mask in after.items() if i in before and bool((mask & ~before[i]).any())]
        if not bad:
            return
        inputs_finite = not any(bool(before[i].any()) for i in before if i not in bad)
        values = self._eager(graph)
        eager = "unknown" if values is None else _eager_verdict(
            [args[i] for i in bad], [values[n] for n in graph.kernels.get(name, ()) if n in values])
        described = tuple(_described(i, args[i]) for i in bad)
        append_line(self.events, KernelEvent(graph.id, name, "nonfinite", number, ordinal, described, inputs_finite,
                                             eager))  # type: ignore[arg-type]
        if eager != "nonfinite":
            self.done = True

    def _eager(self, graph: _Graph) -> dict[str, Any] | None:
        """Every node's value, the graph run op by op on the call's input copies (up to an op that raises)."""
        call = graph.call
        if call is None or call.copies is None:
            return None
        if call.eager is None:
            call.eager = _interpret(graph.gm, call.copies)
        return call.eager

    def close(self) -> None:
        self.marker.close()
        self._marker_file.close()
        for handle in (self.compiled, self.events, self.ranges):
            handle.close()


class _Launcher:
    """A Triton kernel of the output code, its `.run` launches checked; everything else its own."""

    def __init__(self, kernel: Any, launch: Callable[..., Any]) -> None:
        self._kernel = kernel
        self._launch = launch

    def run(self, *args: Any, **kwargs: Any) -> Any:
        return self._launch(self._kernel.run, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kernel, name)


def _quietly(check: Callable[..., Any], *args: Any) -> Any:
    """A check that fails (an argument it cannot read, a device in a broken state) checks nothing: it never
    changes what the program does."""
    try:
        return check(*args)
    except Exception:
        return None


def _next(call: _Call) -> int:
    call.ordinal += 1
    return call.ordinal


def _nonfinite(args: Sequence[Any]) -> dict[int, Any]:
    """{argument position: where it is NaN or Inf} for each floating-point tensor argument."""
    import torch

    return {i: ~torch.isfinite(a) for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.is_floating_point()}


def _copies(inputs: Sequence[Any], budget: int) -> list[Any] | None:
    """Copies of a call's tensor inputs (the output code frees them as it goes), None past `budget` bytes."""
    import torch

    size = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))
    if size > budget:
        return None
    with torch.no_grad():
        return [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def _interpret(gm: Any, inputs: list[Any]) -> dict[str, Any]:
    import torch
    import torch.fx

    values: dict[str, Any] = {}

    class Recording(torch.fx.Interpreter):
        def run_node(self, n: Any) -> Any:
            result = super().run_node(n)
            values[n.name] = result
            return result

    try:
        with torch.no_grad():
            Recording(gm).run(*inputs)
    except Exception:  # eager fails at some op (an index out of range): the values before it are kept
        pass
    return values


def _eager_verdict(bad: Sequence[Any], eager: Sequence[Any]) -> str:
    """`nonfinite` when eager's values at the kernel's nodes explain every bad output (NaN where eager has NaN,
    Inf where eager is not finite, element by element where a node has the output's shape), else `finite`;
    `unknown` when eager has no value at any of them (it failed before them: out of memory, say)."""
    import torch

    tensors = [v for v in eager if isinstance(v, torch.Tensor) and v.is_floating_point()]
    if not tensors:
        return "unknown"
    for out in bad:
        same = [v for v in tensors if v.shape == out.shape]
        if same:
            nan, inf = torch.isnan(out), torch.isinf(out)
            if not any(bool(((nan & ~torch.isnan(v)) | (inf & torch.isfinite(v))).sum() == 0) for v in same):
                return "finite"
        elif not any(bool((~torch.isfinite(v)).any()) for v in tensors):
            return "finite"
    return "nonfinite"


def _described(position: int, tensor: Any) -> BadTensor:
    import torch

    return BadTensor(position, tuple(tensor.shape), str(tensor.dtype).removeprefix("torch."),
                     int(torch.isnan(tensor).sum()), int(torch.isposinf(tensor).sum()),
                     int(torch.isneginf(tensor).sum()))


def _synchronize() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


_installed: KernelChecker | None = None


def install(spec: KernelCheckSpec) -> Callable[[], None]:
    """Start checking; returns the uninstall function."""
    global _installed
    checker = KernelChecker(spec)
    _installed = checker
    restores = [torch_compat.kernel_debug_config(spec.sync), torch_compat.patch_inductor_inner_compile(
        checker.on_inner_compile)]

    def uninstall() -> None:
        for restore in reversed(restores):
            restore()
        checker.close()

    return uninstall

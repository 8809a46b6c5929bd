"""Count how often each compiled graph runs (tlparse#46: "how often do compiled frames run?").

Contract: `install()` (in the child, before the script runs) wraps every callable a Dynamo backend
returns in a counter keyed by the compile id it was compiled under, and returns the `Calls` it counts
in: `counts()`, the `{compile id: calls}`, and `order`, the compile ids of the first `MAX_ORDER` calls
in the order they came (whether ranks run their graphs in the same order), which the child writes to
its sidecar at exit. An exception that comes out of
a compiled graph's call is tagged with that graph's compile id (`RAISED_BY`), and so is one that comes
out of a backward graph's compile, which AOTAutograd runs lazily inside `loss.backward()` (the
compilers every `aot_autograd` backend hands it are wrapped; their results are not). The wrapper is one Python call and
an integer add per graph call, and keeps the boxed calling convention (`_boxed_call`). It imports
nothing: the hook goes in when the script itself imports Dynamo (import hooks on
`torch._dynamo.output_graph` and `torch._dynamo.backends.common`), so a script that never uses torch still never imports
it.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import sys
from collections import Counter
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from pt2doctor.capture import torch_compat

MAX_ORDER = 4096  # the calls whose order is kept: enough to see where two ranks' steps part


class Calls:
    def __init__(self) -> None:
        self.counted: Counter[str] = Counter()
        self.order: list[str] = []

    def counts(self) -> dict[str, int]:
        return dict(self.counted)

    def called(self, compile_id: str) -> None:
        self.counted[compile_id] += 1
        if len(self.order) < MAX_ORDER:
            self.order.append(compile_id)


def install() -> Calls:
    calls = Calls()

    def on_backend_call(original: Callable[..., Any], output_graph: Any, gm: Any, example_inputs: Any) -> Any:
        compiled = original(output_graph, gm, example_inputs)
        compile_id = torch_compat.current_compile_id() or "?"
        calls.counted[compile_id] += 0  # a graph that never runs shows 0, not "unknown"

        @functools.wraps(compiled)
        def counted(*args: Any, **kwargs: Any) -> Any:
            calls.called(compile_id)
            try:
                return compiled(*args, **kwargs)
            except BaseException as exc:
                mark_raised_by(exc, compile_id)
                raise

        return counted

    def on_aot_compile(kind: str, original: Callable[..., Any], gm: Any, example_inputs: Any) -> Any:
        try:
            return original(gm, example_inputs)
        except BaseException as exc:  # a backward compiles lazily, in `loss.backward()`: the graph's failure
            if kind == "backward":
                mark_raised_by(exc, torch_compat.current_compile_id())
            raise

    after_import(_HOOKED_MODULE, lambda: torch_compat.patch_backend_call(on_backend_call))
    # its own module: patching while `output_graph` is imported would import it inside Dynamo's own init
    after_import(_AOT_MODULE, lambda: torch_compat.patch_aot_compilers(on_aot_compile))
    return calls


RAISED_BY = "_pt2doctor_raised_by_graph"


def mark_raised_by(exc: BaseException, compile_id: str | None) -> None:
    """Tag `exc` with the compiled graph it came out of as that graph ran (the innermost one wins), so
    the child's record can tell a graph's run-time error from the script's own (also the graph
    recorder's, for a backward graph's compile or run: `capture.child.graph_runs`)."""
    if compile_id is not None and not hasattr(exc, RAISED_BY):
        with suppress(AttributeError, TypeError):  # an exception type without a __dict__: left untagged
            setattr(exc, RAISED_BY, compile_id)


_HOOKED_MODULE = "torch._dynamo.output_graph"  # defines OutputGraph, the one place backends are called
_AOT_MODULE = "torch._dynamo.backends.common"  # defines AotAutograd, which hands AOTAutograd its compilers


def after_import(name: str, then: Callable[[], object]) -> None:
    """Run `then()` right after module `name` is first imported (at once if it already is)."""
    if name in sys.modules:
        then()
        return
    sys.meta_path.insert(0, _AfterImport(name, then))


class _AfterImport(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, then: Callable[[], object]) -> None:
        self.name, self.then = name, then

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        loader, then = spec.loader, self.then
        exec_module = loader.exec_module

        def exec_then(module: Any) -> None:
            exec_module(module)
            then()

        loader.exec_module = exec_then  # type: ignore[method-assign]
        return spec

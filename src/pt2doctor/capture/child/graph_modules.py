"""A recorded graph module's parts: the graph submodules it reaches (a higher-order op's branches) and its constants.

Contract: `submodules(gm)` lists (qualified name, graph module) for every graph module `gm` reaches by get_attr,
recursively, parents first (written as code beside the graph, `capture.child.graph_recorder`); `save_constants(gm,
path)` saves its and their get_attr tensors (tensors only, so `torch.load(weights_only=True)` reads them back) and
returns the file's name, None when there are none; `graph_copy(gm)` is a GraphModule sharing `gm`'s parameters with
a graph of its own, for a backend that may rewrite the one it is given. torch is imported when they are called.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def save_constants(gm: Any, path: Path) -> str | None:
    """The get_attr tensors of `gm` and of its graph submodules (by qualified name, `cond_true_0.c`):
    tensors only, so `torch.load(weights_only=True)` reads them back; the submodules are code."""
    import torch

    modules = [("", gm), *submodules(gm)]
    values = {
        f"{prefix}.{n.target}".lstrip("."): _attr(module, str(n.target))
        for prefix, module in modules for n in module.graph.nodes if n.op == "get_attr"
    }
    values = {name: value for name, value in values.items() if isinstance(value, torch.Tensor)}
    if not values:
        return None
    torch.save(values, path)
    return path.name


def _attr(module: Any, target: str) -> Any:
    for part in target.split("."):
        module = getattr(module, part)
    return module


def submodules(gm: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """(qualified name, graph module) for every graph module `gm` reaches by get_attr, recursively, parents first."""
    import torch.fx

    found = []
    for node in gm.graph.nodes:
        value = _attr(gm, str(node.target)) if node.op == "get_attr" else None
        if isinstance(value, torch.fx.GraphModule):
            name = f"{prefix}{node.target}"
            found += [(name, value), *submodules(value, f"{name}.")]
    return list(dict(found).items())


def graph_copy(gm: Any) -> Any:
    """A GraphModule sharing `gm`'s parameters with a graph of its own (a backend may rewrite the one it is given)."""
    import copy

    import torch.fx

    return torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))

"""Private torch API for walking nested containers of tensors (`torch.utils._pytree`): the accuracy probe
and the export checks. See the package contract in `torch_compat/__init__.py`.

`torch.utils._pytree` has no public home on the torch versions we support (2.11, 2.13, 2.14: no
`torch.utils.pytree` module); it is the one torch's own `torch.export` and `torch.compile` flatten with,
so a container torch registered (a `namedtuple`, a `ModelOutput`) flattens here as it does there.
"""

from __future__ import annotations

from typing import Any


def tree_leaves(value: Any) -> list[Any]:
    import torch.utils._pytree as pytree

    return pytree.tree_leaves(value)


def tree_flatten(value: Any) -> tuple[list[Any], Any]:
    """(leaves, spec): `tree_unflatten(leaves, spec)` builds the same structure back."""
    import torch.utils._pytree as pytree

    return pytree.tree_flatten(value)


def tree_unflatten(leaves: list[Any], spec: Any) -> Any:
    import torch.utils._pytree as pytree

    return pytree.tree_unflatten(leaves, spec)

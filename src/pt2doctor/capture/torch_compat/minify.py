"""Private torch APIs for the minifier's FX adapter (reduce.fx_case, reduce.api). See the package
contract in `torch_compat/__init__.py`."""

from __future__ import annotations

from typing import Any


def fake_tensor_mode() -> Any:
    """A `FakeTensorMode` that accepts real tensors as inputs too (`torch._subclasses.fake_tensor`,
    2.11, 2.13): a graph fake-runs on its input specs without allocating their memory."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode(allow_non_fake_inputs=True)


def is_operator(target: object) -> bool:
    """Whether an FX node's target is an op of any kind: an overload, a packet or a higher-order op
    (`torch._ops.OperatorBase`, `OpOverloadPacket`, 2.11, 2.13), as opposed to a plain function."""
    import torch._ops

    return isinstance(target, (torch._ops.OperatorBase, torch._ops.OpOverloadPacket))


def mutates_an_argument(target: object) -> bool:
    """Whether an op overload writes into an argument (`aten.copy_`, `aten.add_.Tensor`): its schema is
    mutable (`OpOverload._schema.is_mutable`, 2.11, 2.13)."""
    import torch._ops

    return isinstance(target, torch._ops.OpOverload) and bool(target._schema.is_mutable)


def is_op_overload(target: object) -> bool:
    """Whether an FX node's target is an aten/prims overload (`torch._ops.OpOverload`, 2.11, 2.13):
    a graph of these is post-AOTAutograd."""
    import torch._ops

    return isinstance(target, torch._ops.OpOverload)

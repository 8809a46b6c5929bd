"""Minimal repro written by pt2doctor; needs plain torch only.

Stage: aot.
Run `python repro.py`: it exits non-zero while the bug is present.
"""

import sys
import traceback

import torch
import torch._dynamo
import torch.fx

import torch._inductor.config
torch._inductor.config.compile_threads = 1  # one small graph: no compile worker pool


class Repro(torch.nn.Module):
    def forward(self, x):
        eye = torch.ops.aten.eye.default(4, dtype=torch.float32, device=torch.device('cpu'), pin_memory=False)
        add = torch.ops.aten.add.Tensor(x, eye);  x = eye = None
        return (add,)


def make_inputs():
    torch.manual_seed(0)
    args = [
        make_tensor((4, 4), (4, 1), torch.float32, 'cpu'),
    ]
    return args


class InvalidRepro(Exception):
    """Eager itself fails: this program does not show a compiler bug."""


def make_tensor(shape, stride, dtype, device, requires_grad=False, bounds=None, offset=0):
    extent = offset + (1 + sum((size - 1) * step for size, step in zip(shape, stride)) if all(shape) else 0)
    if dtype.is_floating_point or dtype.is_complex:
        storage = torch.randn(extent, dtype=dtype, device=device)
    elif dtype == torch.bool:
        storage = torch.rand(extent, device=device) > 0.5
    elif bounds is not None:  # the recorded range: indices stay in bounds
        storage = torch.randint(bounds[0], bounds[1] + 1, (extent,), dtype=dtype, device=device)
    else:
        storage = torch.zeros(extent, dtype=dtype, device=device)  # zeros are valid indices
    return storage.as_strided(shape, stride, offset).requires_grad_(requires_grad)


def synchronize():
    """Wait for the GPU: CUDA reports a kernel's error at a later call, which must be in the part that launched it."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def describe_failure(exc):
    while getattr(exc, "inner_exception", None) is not None:
        exc = exc.inner_exception
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return type(exc).__name__ + ": " + (lines[0].strip() if lines else "")

TORCH_OPS = ('aten.eye.default',)

from typing import Any


def graph_module(module: Any, ops: tuple[str, ...]) -> Any:
    """`module` as a GraphModule in which every call of an op in `ops` (`aten.eye.default`,
    `higher_order.cond`) or of a torch function named in it (`torch._C._set_fwd_grad_enabled`) is a
    node, whatever its operands; submodules (higher-order branches) first."""
    import torch
    import torch.fx

    for name, child in list(module.named_children()):
        if not isinstance(child, torch.fx.GraphModule):
            setattr(module, name, graph_module(child, ops))
    tracer = torch.fx.Tracer()

    def record(target: Any) -> Any:
        return lambda *args, **kwargs: tracer.create_proxy("call_function", target, args, kwargs)

    class Packet:
        """An op packet whose named overloads record nodes; the rest of it is the real packet's."""

        def __init__(self, packet: Any, overloads: set[str]) -> None:
            self.packet, self.overloads = packet, overloads

        def __getattr__(self, name: str) -> Any:
            target = getattr(self.packet, name)
            return record(target) if name in self.overloads else target

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return tracer.create_proxy("call_function", self.packet, args, kwargs)

    overloads: dict[tuple[str, str], set[str]] = {}
    patched = []
    for qualified in ops:
        if qualified.startswith("torch."):  # a function: recorded where the code looks it up
            owner_name, _, attribute = qualified.rpartition(".")
            owner = torch
            for part in owner_name.split(".")[1:]:
                owner = getattr(owner, part)
            patched.append((owner, attribute, owner.__dict__.get(attribute)))
            setattr(owner, attribute, record(getattr(owner, attribute)))
            continue
        namespace_name, op, *overload = qualified.split(".")
        overloads.setdefault((namespace_name, op), set()).update(overload)
    for (namespace_name, op), names in overloads.items():
        namespace = getattr(torch.ops, namespace_name)
        real = getattr(namespace, op)
        patched.append((namespace, op, namespace.__dict__.get(op)))
        setattr(namespace, op, Packet(real, names) if names else record(real))
    # `x[i] = v` on a traced value: Dynamo writes it so (flex_attention's block mask), a Proxy has no __setitem__
    import operator

    patched.append((torch.fx.Proxy, "__setitem__", torch.fx.Proxy.__dict__.get("__setitem__")))
    torch.fx.Proxy.__setitem__ = lambda self, key, value: record(operator.setitem)(self, key, value)  # type: ignore[assignment, method-assign]
    try:
        graph = tracer.trace(module)
    finally:
        for namespace, op, cached in reversed(patched):
            if cached is None:
                delattr(namespace, op)
            else:
                setattr(namespace, op, cached)
    return torch.fx.GraphModule(module, graph)


def compile_repro(mod, args):
    from torch._inductor.compile_fx import compile_fx_inner

    gm = mod if isinstance(mod, torch.fx.GraphModule) else torch.fx.symbolic_trace(mod)
    compiled = compile_fx_inner(gm, list(args))
    return lambda *a: compiled(list(a))


def check():
    mod = graph_module(Repro(), TORCH_OPS)
    args = make_inputs()
    try:
        mod(*args)
        synchronize()
        eager_error = None
    except Exception as e:
        eager_error = e
    compiled = compile_repro(mod, args)
    if eager_error is not None:
        raise InvalidRepro(f"eager run fails: {type(eager_error).__name__}") from eager_error
    compiled(*args)
    synchronize()


if __name__ == "__main__":
    try:
        check()
    except Exception as e:
        traceback.print_exc()
        print("PT2DOCTOR REPRO FAILED: " + describe_failure(e), file=sys.stderr)
        sys.exit(1)
    print("repro passed: the failure did not reproduce")

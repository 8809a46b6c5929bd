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
torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'compile_error'

import torch._inductor.config
torch._inductor.config.compile_threads = 1  # one small graph: no compile worker pool


class Repro(torch.nn.Module):
    def forward(self, arg0_1):
        relu = torch.ops.aten.relu.default(arg0_1);  arg0_1 = None
        return (relu,)


def make_inputs():
    torch.manual_seed(0)
    args = [
        make_tensor((16, 16), (16, 1), torch.float32, 'cpu'),
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


def compile_repro(mod, args):
    from torch._inductor.compile_fx import compile_fx_inner

    gm = mod if isinstance(mod, torch.fx.GraphModule) else torch.fx.symbolic_trace(mod)
    compiled = compile_fx_inner(gm, list(args))
    return lambda *a: compiled(list(a))


def check():
    mod = Repro()
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

"""The text pieces a repro is assembled from (`reduce.repro.render` picks them): plain torch only.

Contract: constants of program text, no logic. Each piece is included only where the repro needs it,
so a crash repro carries no accuracy helpers, a static one no symbolic tracing, and one with no saved
values no loader for them: a one-op repro reads in one screen.
"""

from __future__ import annotations

from pt2doctor.model.signature import ACCURACY_MESSAGE, ACCURACY_TYPE, FAILURE_MARKER

IMPORTS = "import sys\nimport traceback\n\nimport torch\nimport torch._dynamo\nimport torch.fx\n"

# Inductor's prims (its random ones: dropout after AOT; max-pool offsets) exist only once this module is imported.
INDUCTOR_PRIMS = "import torch._inductor.inductor_prims  # registers prims.inductor_seeds & co, which the graph calls\n"

# Compile in this process, as the minifier's workers did: a pool of compile workers takes longer to
# start (seconds per worker, each importing torch) than one small graph takes to compile, and a
# failure inside one reaches the caller only wrapped (`SubprocException`).
ONE_COMPILE_THREAD = """\
import torch._inductor.config
torch._inductor.config.compile_threads = 1  # one small graph: no compile worker pool
"""

HELPERS = '''
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
'''

# The file is read once for the values one `make_inputs()` takes, not once for each (ResNet's eval graph: 58 reads of
# its 58 values, 0.36 s of a 0.7 s query); each read's values are handed out once, so a second `make_inputs()` gets
# values of its own, as it did reading the file for each.
SAVED_INPUT = '''
_UNUSED = {}


def saved_input(name, device, requires_grad=False):
    """A saved input value, from `repro_inputs.pt` beside this script (tensors only, weights_only)."""
    import os

    if name not in _UNUSED:  # each value is taken once: a second make_inputs() reads the file again
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "repro_inputs.pt")
        _UNUSED.clear()
        _UNUSED.update(torch.load(path, weights_only=True, mmap=True))
    return _UNUSED.pop(name).to(device).requires_grad_(requires_grad)
'''

ACCURACY_ERROR = f'''
class {ACCURACY_TYPE}(Exception):
    """Compiled and eager results differ beyond the fp64-referenced tolerance."""
'''

COMPILE_DYNAMO = '''
def compile_repro(mod, args):
    return torch.compile(mod, backend=BACKEND, fullgraph=True)
'''

COMPILE_AOT = '''
def compile_repro(mod, args):
    from torch._inductor.compile_fx import compile_fx_inner

    gm = mod if isinstance(mod, torch.fx.GraphModule) else torch.fx.symbolic_trace(mod)
    compiled = compile_fx_inner(gm, EXAMPLESBACKWARD_ARG)
    return lambda *a: compiled(list(a))
'''
# COMPILE_AOT's EXAMPLES where an input is a ZeroTensor: AOTAutograd hands Inductor plain fakes of it to compile
# for, and the compiled graph is then called with the ZeroTensor (compiling for it fails otherwise: Inductor's
# debug copy of the graph cannot save one)
PLAIN_EXAMPLES = ("[torch.zeros(a.shape, dtype=a.dtype, device=a.device) "
                  "if isinstance(a, torch.Tensor) and a._is_zerotensor() else a for a in args]")

# A backward graph (what AOTAutograd hands `bw_compiler`: saved activations and tangents in, gradients
# out) compiled the way the backend compiled it: Inductor's with `is_backward=True` (in place of
# COMPILE_AOT's `BACKWARD_ARG`), any other `aot_autograd` backend's with its own backward compiler, as AOTAutograd
# calls it (its forward compiler when it has none; a stub backend stands for itself).
COMPILE_AOT_BACKWARD = '''
def compile_repro(mod, args):
    from torch._dynamo.backends.registry import lookup_backend

    backend = lookup_backend(BACKEND) if isinstance(BACKEND, str) else BACKEND
    kwargs = getattr(backend, "kwargs", {})  # an aot_autograd(...) backend's compilers
    bw_compiler = kwargs.get("bw_compiler") or kwargs.get("fw_compiler") or backend
    gm = mod if isinstance(mod, torch.fx.GraphModule) else torch.fx.symbolic_trace(mod)
    compiled = bw_compiler(gm, list(args))
    return (lambda *a: compiled(list(a))) if getattr(compiled, "_boxed_call", False) else compiled
'''

# After AOT with symbolic sizes, the graph Inductor gets is traced with a SymInt exactly where the
# recorded run had one (`DYNAMIC_DIMS`; pytorch#114296) and a static size everywhere else.
COMPILE_AOT_DYNAMIC = '''
def compile_repro(mod, args):
    from torch._inductor.compile_fx import compile_fx_inner

    gm = trace_symbolic(mod, args)
    compiled = compile_fx_inner(gm, [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]BACKWARD_ARG)
    return lambda *a: compiled(list(a))


def trace_symbolic(mod, args):
    """The graph traced with symbolic sizes where the recorded run had them (`DYNAMIC_DIMS`), static elsewhere."""
    from torch._dynamo.source import LocalSource
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

    fake_mode = FakeTensorMode(shape_env=ShapeEnv())
    shape_env, fakes = fake_mode.shape_env, []
    for index, (arg, dims) in enumerate(zip(args, DYNAMIC_DIMS)):
        source = LocalSource(f"arg{index}")
        if isinstance(arg, torch.Tensor):
            sizes = [DimDynamic.DYNAMIC if d in dims else DimDynamic.STATIC for d in range(arg.dim())]
            context = StatelessSymbolicContext(dynamic_sizes=sizes)
            fakes.append(fake_mode.from_tensor(arg, source=source, symbolic_context=context))
        elif dims:  # a SymInt input
            symbol = shape_env.create_symbol(arg, source, dynamic_dim=DimDynamic.DYNAMIC)
            fakes.append(shape_env.create_symintnode(symbol, hint=arg, source=source))
        else:
            fakes.append(arg)
    with fake_mode:
        return make_fx(mod)(*fakes)
'''

# An exported program's graph, deployed the AOTInductor way. The package goes to a scratch directory: a
# candidate's package must not be another's (the workers compile side by side), and none is kept.
COMPILE_AOTI = '''
def compile_repro(mod, args):
    import os
    import tempfile

    program = torch.export.export(mod, tuple(args), strict=False)
    with tempfile.TemporaryDirectory() as scratch:
        path = torch._inductor.aoti_compile_and_package(
            program, package_path=os.path.join(scratch, "repro.pt2"), inductor_configs=INDUCTOR_CONFIGS)
        return torch._inductor.aoti_load_package(path)
'''

# The Dynamo stage, for graphs Dynamo cannot compile again from their code.
COMPILE_DIRECT = '''
def compile_repro(mod, args):
    """Dynamo cannot trace every higher-order op it emits (autograd_function_apply: "unsupported
    HigherOrderOperator", gb0306) nor all the scaffolding it writes (torch.func's), so the graph goes
    to the backend as Dynamo handed it over."""
    from torch._dynamo.backends.registry import lookup_backend

    backend = lookup_backend(BACKEND) if isinstance(BACKEND, str) else BACKEND
    return backend(mod, list(args))
'''

# The Dynamo stage with int inputs that were SymInts when the graph failed: `mark_dynamic` takes
# tensors only, and a plain int argument is specialized, so those sources are named dynamic.
COMPILE_DYNAMIC_SOURCES = '''
def compile_repro(mod, args):
    compiled = torch.compile(mod, backend=BACKEND, fullgraph=True)

    def run(*args):
        with torch.compiler.config.patch(dynamic_sources=DYNAMIC_SOURCES):
            return compiled(*args)

    return run
'''

# A graph whose eager run fails is invalid, but after AOT the graph compiles inside `compile_repro`: a compile that
# fails there is the failure whatever eager does (a flex_attention backward whose eager implementation fails too,
# pytorch#145208).
CHECK = '''
def check():
    mod = MAKE_MODULE
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
'''

CHECK_ACCURACY = f'''
def check():
    mod = MAKE_MODULE
    args = make_inputs()
    try:
        expected, _ = reference_runs(mod, args, fp64=False)
        synchronize()
    except Exception as e:
        raise InvalidRepro(f"eager run fails: {{type(e).__name__}}") from e
    state, before = rng_state(), copy_inputs(args)  # the fp64 reference's, where it is needed
    actual = compile_repro(mod, args)(*args)
    synchronize()
    if not same_as_fp64_reference(mod, before, expected, actual, TOLERANCE, state=state):
        raise {ACCURACY_TYPE}("{ACCURACY_MESSAGE}")
'''



def with_grads(check: str) -> str:
    """CHECK_ACCURACY with each side's backward run and judged too (`accuracy_rule.with_grads`)."""
    eager, compiled = "reference_runs(mod, args, fp64=False)", "actual = compile_repro(mod, args)(*args)"
    judged = "TOLERANCE, state=state)"
    assert eager in check and compiled in check and judged in check, \
        "CHECK_ACCURACY no longer runs both sides as written here"
    return (check.replace(eager, "reference_runs(mod, args, fp64=False, grads=GRADS)")
            .replace(compiled, "actual = with_grads(compile_repro(mod, args))(*args)")
            .replace(judged, "TOLERANCE, grads=GRADS, state=state)"))


def without_grad(check: str) -> str:
    """A check whose two sides run under `torch.no_grad()`, once the inputs are made as the program had them."""
    made = "    args = make_inputs()\n"
    assert made in check, "the check no longer makes its inputs as written here"
    return check.replace(made, made + "    torch.set_grad_enabled(False)  # as the program compiled the graph\n")


MAIN = f'''

if __name__ == "__main__":
    try:
        check()
    except Exception as e:
        traceback.print_exc()
        print("{FAILURE_MARKER}" + describe_failure(e), file=sys.stderr)
        sys.exit(1)
    print("repro passed: the failure did not reproduce")
'''

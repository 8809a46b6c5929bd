"""User backends that need their module: globals, helpers, aot_autograd, a callable class, a closure.

Each backend refuses one op of `probe`, so every compile fails; the script carries on to the next.
Recorded by tests/minify/test_backend_source.py.
"""

import threading

import torch
import torch.nn.functional as F
from torch._dynamo.backends.common import aot_autograd

UNSUPPORTED = {"tan", "cos"}
LIMITS = {"max_nodes": (40, 50), "names": ["a", "b"]}


class MyBackendError(Exception):
    """Raised by the backends below; defined here, so a repro needs its source."""


def banned(node):
    name = getattr(node.target, "__name__", str(node.target))
    return name in UNSUPPORTED or (node.target is torch.tanh and LIMITS["max_nodes"][0] > 0)


def globals_backend(gm, example_inputs):
    for node in gm.graph.nodes:
        if node.op == "call_function" and banned(node):
            raise MyBackendError(f"globals_backend: {node.target.__name__} unsupported")
    return gm.forward


def refuse_sin(gm, example_inputs):
    for node in gm.graph.nodes:
        if node.op == "call_function" and "sin" in str(node.target):
            raise MyBackendError(f"refuse_sin: cannot lower {node.target}")
    return gm


def keep(gm, example_inputs):
    return gm


my_aot_backend = aot_autograd(fw_compiler=refuse_sin, bw_compiler=keep)


class MyCompiler:
    def __init__(self, strict):
        self.strict = strict

    def __call__(self, gm, example_inputs):
        for node in gm.graph.nodes:
            if self.strict and node.op == "call_function" and banned(node):
                raise RuntimeError(f"MyCompiler: {node.target.__name__} unsupported")
        return gm.forward


class Tally:
    """__init__ does more than store its argument: rebuilt from its attributes."""

    def __init__(self, limit):
        self.limit = limit * 2
        self.seen = []

    def __call__(self, gm, example_inputs):
        if len(gm.graph.nodes) > self.limit // 2:
            raise ValueError(f"Tally: {len(gm.graph.nodes)} nodes over {self.limit // 2}")
        return gm.forward


class Locked:
    """Holds a lock: cannot be written as source, so the repro gets a stub."""

    def __init__(self):
        self.lock = threading.Lock()

    def __call__(self, gm, example_inputs):
        raise RuntimeError("Locked: always fails")


def make_backend(op_name):
    def closure_backend(gm, example_inputs):
        if any(op_name in str(node.target) for node in gm.graph.nodes):
            raise MyBackendError(f"closure_backend: {op_name} refused")
        return F.relu and gm.forward

    return closure_backend


def probe(x):
    return torch.tan(torch.sin(x) * 2).relu().sum()


def attempt(backend):
    torch._dynamo.reset()
    try:
        torch.compile(probe, backend=backend, fullgraph=True)(torch.randn(4))
    except Exception as exc:  # each backend fails; the next one still runs
        print(type(exc).__name__)


attempt(globals_backend)
attempt(my_aot_backend)
attempt(MyCompiler(strict=True))
attempt(Tally(1))
attempt(Locked())
attempt(make_backend("relu"))

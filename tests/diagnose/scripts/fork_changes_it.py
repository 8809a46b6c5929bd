"""A backend whose error says how the interpreter started: forked from one that had imported torch (`python -c`, the
diagnosis's fork server) or anew. Stands for any program a fork would change."""
import sys

import torch

HOW = "forked" if "-c" in sys.orig_argv else "started anew"


def picky_backend(gm, example_inputs):
    raise RuntimeError(f"picky_backend refuses this graph ({HOW})")


torch.compile(lambda x: torch.sin(x) + 1, backend=picky_backend)(torch.randn(3))

import time

import torch


def slow_on_a_part(gm, example_inputs):
    # the program's graph (two ops) fails at once, so the first run and the stage's evidence take what the
    # interpreter takes; any smaller graph (a minifier's candidate) waits a minute first, so no minifier ends
    if sum(node.op == "call_function" for node in gm.graph.nodes) < 2:
        time.sleep(60)
    raise RuntimeError("slow_on_a_part refuses this graph")


torch.compile(lambda x: torch.sin(x) + 1, backend=slow_on_a_part)(torch.randn(3))

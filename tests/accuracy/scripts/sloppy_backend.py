"""A user backend with a planted bug, shared by planted scripts: softmax's result is rounded through
bfloat16 (a realistic "fast softmax" bug), every other op runs as Dynamo traced it."""
import torch

SOFTMAX = (torch.softmax, torch.nn.functional.softmax)


def round_softmax_through_bf16(gm, example_inputs):
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target in SOFTMAX:
            with gm.graph.inserting_after(node):
                low = gm.graph.call_method("to", (node, torch.bfloat16))
            with gm.graph.inserting_after(low):
                back = gm.graph.call_method("to", (low, torch.float32))
            node.replace_all_uses_with(back, delete_user_cb=lambda user, low=low: user is not low)
    gm.recompile()
    return gm.forward

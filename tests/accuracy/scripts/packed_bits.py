"""Weights that arrive as int32 bit patterns and are reinterpreted with `.view(torch.float32)`: a
bitcast stays float32 in the fp64 run, so torch.matmul raises there and the graph has no fp64
reference. It is then judged against eager alone, as same_two_models does; with the planted softmax
bug of `sloppy_backend` that judgement fails. `--backend eager` makes the same graph pass."""
import torch
from sloppy_backend import round_softmax_through_bf16


def attention(x, packed_w):
    w = packed_w.view(torch.float32)
    scores = torch.softmax(x @ w @ x.T / 4, dim=-1)
    return scores @ x


torch.manual_seed(0)
packed = torch.randn(16, 16).view(torch.int32)
print(torch.compile(attention, backend=round_softmax_through_bf16)(torch.randn(8, 16), packed).sum().item())

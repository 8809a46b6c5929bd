"""
issue: https://github.com/pytorch/pytorch/issues/145050
title: Make flex_attention work if `score_mod`'s output doesn't require gradients at all
kind: crash
category: backend_failure
stage: inductor
culprit: higher_order.flex_attention_backward lowering; when score_mod returns a value independent of `score`, the score_mod joint graph returns None for the score gradient and the Inductor lowering (process_joint_outputs: "joint_subgraph_buffer is None - this is a bug!") / template has no grad_scores subgraph to inline
fails_on: torch 2.11.0+cu130 on H200 (triton 3.6.0): InductorError: LoweringException: AssertionError: joint_subgraph_buffer is None - this is a bug!; the script catches it and exits 1. A small stand-in for the issue's repro (it needs healpix data): a score_mod that ignores `score`; fix PR #185991 (2026-06, matched by content); torch 2.13's create_fw_bw_graph still returns None for the score gradient. Found by a corpus hunt (a helper), checked on the lent H200
"""
import sys
import torch
from torch.nn.attention.flex_attention import flex_attention

torch.manual_seed(0)
device = "cuda"
B, H, S, D = 1, 2, 256, 64
g = torch.Generator(device=device).manual_seed(0)
q, k, v = [torch.randn(B, H, S, D, device=device, generator=g, requires_grad=True) for _ in range(3)]
head_bias = torch.randn(H, device=device, generator=g)


def score_mod(score, b, h, q_idx, kv_idx):
    # ignores `score` entirely: a pure positional/head bias (like the sparsity "mask" score_mod)
    return head_bias[h] - 0.01 * (q_idx - kv_idx).abs()


# reference in plain PyTorch: softmax(bias) @ v; dq = dk = 0
qi = torch.arange(S, device=device)
bias = head_bias.view(1, H, 1, 1) - 0.01 * (qi[:, None] - qi[None, :]).abs()
ref_out = torch.softmax(bias.expand(B, H, S, S), dim=-1) @ v.detach()

compiled = torch.compile(flex_attention, dynamic=False)
try:
    out = compiled(q, k, v, score_mod=score_mod)
    out.sum().backward()
except Exception as e:  # expected on torch 2.11: InductorError (AssertionError) lowering flex_attention_backward
    print(f"FAIL: compiled flex_attention fwd/bwd raised {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}")
    sys.exit(1)
torch.testing.assert_close(out, ref_out, atol=1e-4, rtol=1e-4)
torch.testing.assert_close(q.grad, torch.zeros_like(q), atol=1e-5, rtol=0)
torch.testing.assert_close(k.grad, torch.zeros_like(k), atol=1e-5, rtol=0)
ref_dv = torch.softmax(bias.expand(B, H, S, S), dim=-1).transpose(-2, -1) @ torch.ones_like(out)
torch.testing.assert_close(v.grad, ref_dv, atol=1e-4, rtol=1e-4)
print("PASS")

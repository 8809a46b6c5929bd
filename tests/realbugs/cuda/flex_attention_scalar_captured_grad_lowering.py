"""
issue: https://github.com/pytorch/pytorch/issues/145208
title: Some FlexAttention learned bias bugs/limitations
kind: crash
category: backend_failure
stage: inductor
culprit: higher_order.flex_attention_backward lowering (torch/_inductor/kernel/flex/flex_attention.py process_joint_outputs); a captured 0-d tensor that requires grad and is used unindexed in score_mod (score * scalar) yields an unnamed scalar ComputedBuffer for its grad, and get_out() fails `assert buf.name is not None`
fails_on: torch 2.11.0+cu130 on H200 (triton 3.6.0): InductorError: LoweringException: AssertionError (bare `assert buf.name is not None`) in the compiled backward; the script catches it and exits 1. Issue open since 2025-01; fix PR #185988 (2026-06, "Fixes #145208") reproduced it on main before the fix; torch 2.13's process_joint_outputs has no fix either. Found by a corpus hunt (a helper), checked on the lent H200
"""
import sys
import torch
from torch.nn.attention.flex_attention import flex_attention

torch.manual_seed(0)
device = "cuda"
S = 128  # the fix PR reproduced it with S=128 (issue used 8192)

result = torch.randn((), device=device, requires_grad=True)


def score_mod(score, b, h, q, kv):
    return score * result


def make_inputs():
    g = torch.Generator(device=device).manual_seed(0)
    return [torch.randn(1, 1, S, 64, device=device, dtype=torch.float16,
                        generator=g, requires_grad=True) for _ in range(3)]


# reference in plain PyTorch (eager flex_attention cannot be used: its backward for an
# unindexed captured scalar fails in vmap, see attention-gym#171)
q, k, v = make_inputs()
scores = (q.float() @ k.float().transpose(-2, -1)) / 8.0  # default scale 1/sqrt(64)
(torch.softmax(scores * result, dim=-1) @ v.float()).sum().backward()
ref = [t.grad.clone() for t in (q, k, v)] + [result.grad.clone()]
result.grad = None

compiled = torch.compile(flex_attention, dynamic=False)
q2, k2, v2 = make_inputs()
try:
    compiled(q2, k2, v2, score_mod=score_mod).sum().backward()
except Exception as e:  # expected on torch 2.11: InductorError / AssertionError in lowering
    print(f"FAIL: compiled flex_attention backward raised {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}")
    sys.exit(1)
got = [t.grad for t in (q2, k2, v2)] + [result.grad]
for name, a, b in zip(["q", "k", "v", "result"], ref, got):
    torch.testing.assert_close(b.float(), a.float(), atol=2e-2, rtol=2e-2, msg=f"grad {name} mismatch")
print("PASS: compiled matches reference")

"""A compiler setting the script makes itself breaks Inductor (planted, CPU): max-autotune's GEMM backends limited
to Triton leave no choice for a matmul on the CPU (NoValidChoicesError). Leaving either setting out compiles it."""

import torch
import torch._inductor.config as inductor_config

inductor_config.max_autotune = True
inductor_config.max_autotune_gemm_backends = "TRITON"


def f(a, b):
    return torch.relu(a @ b)


a, b = torch.randn(16, 16), torch.randn(16, 16)
torch.testing.assert_close(torch.compile(f)(a, b), f(a, b))
print("ok")

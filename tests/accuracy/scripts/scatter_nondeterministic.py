"""index_add with many duplicate indices: Inductor's CPU kernel adds atomically from several threads,
so two compiled runs sum in different orders (nondeterministic, within tolerance). The graph holds a
float32 dtype constant (`dtype=src.dtype`): the fp64 reference run makes it fp64, as torch's cast_to_fp64 does."""
import torch


def f(src, idx):
    out = torch.zeros(8, dtype=src.dtype)
    return out.index_add(0, idx, src * 1.0001)


torch.manual_seed(0)
src = torch.randn(2_000_000)
idx = torch.randint(0, 8, (2_000_000,))
print(torch.compile(f)(src, idx).sum().item())

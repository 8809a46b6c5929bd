"""
issue: https://github.com/pytorch/pytorch/issues/171493
title: incorrect fusion and re-ordering of an index_add
kind: crash
category: backend_failure
stage: inductor
culprit: aten.index_add (lowered to a Scatter with atomic_add; the CPU vectorized store asserts its index is a vector)
fails_on: torch 2.13.0+cpu: InductorError: AssertionError in the C++ codegen's atomic_add store (cpp.py `assert isinstance(index, CppCSEVariable) and index.is_vec`), with 2 threads; the issue's CUDA symptom is a wrong result; torch 2.14.1 (CPU): passes
"""

# The repro with device="cuda" changed to CPU. On CPU it does not give the wrong
# result: Inductor's C++ backend fails to generate the index_add kernel (its vectorized atomic_add
# path, taken when the kernel runs on more than one thread).
import torch


class Example(torch.nn.Module):
    def forward(self, f, batch):
        f_u = f**2 + 0.00987654321
        n_batch = batch.max() + 1
        F_u_mol = torch.zeros((n_batch, f.shape[1]), device=f.device, dtype=f.dtype)
        F_u_mol.index_add_(0, batch, f_u)
        F_u_at_atom = F_u_mol[batch] + 1e-6
        _f = f_u / F_u_at_atom
        return _f


f = torch.ones(1024, 1)
batch = torch.zeros(1024, dtype=torch.long)
m = Example()
e = m(f, batch)
c = torch.compile(m)(f, batch)
print(e.sum(), c.sum())
torch.testing.assert_close(c, e)

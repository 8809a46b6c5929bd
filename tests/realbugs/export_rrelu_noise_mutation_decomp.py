"""
issue: https://github.com/pytorch/pytorch/issues/143379
title: Running decompositions over torch.export program adds one more output to the graph result
kind: wrong_result
category: accuracy
stage: aot_autograd
culprit: aten.rrelu_with_noise (mutates its noise argument; export misses the mutation until run_decompositions)
fails_on: torch 2.13.0+cpu: the exported program has 1 output, the decomposed one 2 (a USER_INPUT_MUTATION of noise appears)
"""

import torch


class Mod(torch.nn.Module):
    def forward(self, x, noise):
        res = torch.ops.aten.rrelu_with_noise(x, noise, 0.4, 0.6, True)
        return torch.mean(res)


example_args = (torch.randn(10, 10), torch.randn(10, 10))
ep = torch.export.export(Mod(), args=example_args)
decomposed = ep.run_decompositions([])
print(ep.graph_signature, decomposed.graph_signature)
before, after = len(ep.graph_signature.output_specs), len(decomposed.graph_signature.output_specs)
assert before == after, f"run_decompositions changed the number of outputs: {before} -> {after}"

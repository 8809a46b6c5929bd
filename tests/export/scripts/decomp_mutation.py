"""run_decompositions returns a program that declares an input mutation the exported one does not
(aten.rrelu_with_noise writes its noise argument; export misses it until decomposition). With argv[1]
"check", the script asserts that decomposition kept the number of outputs, and fails."""
import sys

import torch


class Model(torch.nn.Module):
    def forward(self, x, noise):
        return torch.ops.aten.rrelu_with_noise(x, noise, 0.4, 0.6, True).mean()


ep = torch.export.export(Model(), (torch.randn(4, 4), torch.randn(4, 4)))
decomposed = ep.run_decompositions([])
print(len(ep.graph_signature.output_specs), len(decomposed.graph_signature.output_specs))
if sys.argv[1:] == ["check"]:
    assert len(ep.graph_signature.output_specs) == len(decomposed.graph_signature.output_specs)
clean = torch.export.export(torch.nn.Linear(3, 2), (torch.randn(2, 3),)).run_decompositions()
print("decomposed", len(clean.graph_signature.output_specs))

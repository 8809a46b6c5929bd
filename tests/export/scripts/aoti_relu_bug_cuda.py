"""The CUDA twin of aoti_relu_bug.py: an AOTInductor package for the GPU with Inductor's planted Triton
ReLU bug (argv[1]: compile_error, runtime_error or accuracy; none: no bug), checked against eager."""
import sys

import torch

if len(sys.argv) > 1:
    torch._inductor.config.triton.inject_relu_bug_TESTING_ONLY = sys.argv[1]


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 16)

    def forward(self, x):
        return torch.relu(self.fc(x)) + 1


model = Model().cuda()
x = torch.randn(8, 16, device="cuda")
ep = torch.export.export(model, (x,))
path = torch._inductor.aoti_compile_and_package(ep)
package = torch._inductor.aoti_load_package(path)
torch.testing.assert_close(package(x), model(x))
print("the package matches eager")

"""Export, AOT-compile and run a package with Inductor's planted ReLU bug (argv[1]: compile_error,
runtime_error or accuracy; none: no bug). The script checks the package against eager."""
import sys

import torch

if len(sys.argv) > 1:
    torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = sys.argv[1]


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) + 1


x = torch.randn(4, 3)
ep = torch.export.export(Model(), (x,))
path = torch._inductor.aoti_compile_and_package(ep)
package = torch._inductor.aoti_load_package(path)
torch.testing.assert_close(package(x), Model()(x))
print("the package matches eager")

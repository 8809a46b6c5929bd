"""The exported program keeps the value a global had when it was traced (export specializes on it); the
script changes it afterwards and checks ep.module() against the module. With export off, ep.module() is the
module itself and the check passes."""
import torch

SCALE = 2.0


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * SCALE


model = Model()
x = torch.randn(3, 4)
print("before export:", model(x).sum().item())
ep = torch.export.export(model, (x,))
SCALE = 3.0
torch.testing.assert_close(ep.module()(x), model(x))

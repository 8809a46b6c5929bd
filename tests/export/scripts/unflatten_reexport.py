"""Re-export a torch.export.unflatten module with the spec of the module it came from: torch's
UnflattenedModule.forward takes *args, so export binds the inputs as one tuple and the spec no longer fits."""
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(2, 2)

    def forward(self, x):
        return self.linear(x)


x = torch.rand(2, 2)
spec = ({0: torch.export.Dim.DYNAMIC(min=1, max=1024)},)
program = torch.export.export(Model(), (x,), dynamic_shapes=spec)
torch.export.export(torch.export.unflatten(program), (x,), dynamic_shapes=spec)

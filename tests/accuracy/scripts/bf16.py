"""A bf16 model whose compiled result differs from eager only by rounding: within PyTorch's tolerance."""
import torch


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 64)
        self.fc2 = torch.nn.Linear(64, 8)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)) * torch.sigmoid(x))


torch.manual_seed(0)
model = torch.compile(Net().to(torch.bfloat16))
with torch.no_grad():
    print(model(torch.randn(32, 64, dtype=torch.bfloat16)).float().sum().item())

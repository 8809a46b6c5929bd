"""A model with dropout in training mode: compiled and eager draw different masks unless fallback_random."""
import torch


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(32, 32)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(torch.tanh(self.fc(x)))


torch.manual_seed(0)
model = torch.compile(Net())
print(model(torch.randn(16, 32)).sum().item())

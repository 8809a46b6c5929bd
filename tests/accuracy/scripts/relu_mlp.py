"""An MLP trained for a step, with Inductor's planted relu accuracy bug: forward and backward compiled."""
import torch
import torch._inductor.config

torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 4)

    def forward(self, x):
        hidden = self.fc1(x)
        hidden = torch.nn.functional.relu(hidden)
        return self.fc2(hidden)


torch.manual_seed(0)
model = torch.compile(MLP())
loss = model(torch.randn(8, 16)).pow(2).mean()
loss.backward()
print(loss.item())

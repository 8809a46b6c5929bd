"""A ResNet-style CPU program whose own backend (Inductor's compile_fx behind an op check) trains fine for three
steps, then fails when the model is evaluated: the eval graph returns probabilities, and the backend has no softmax."""
import torch
import torch.nn as nn
from torch._inductor.compile_fx import compile_fx


def my_backend(gm, example_inputs):
    for node in gm.graph.nodes:
        if node.target in (torch.softmax, torch.nn.functional.softmax):
            raise NotImplementedError("my_backend has no kernel for softmax")
    return compile_fx(gm, example_inputs)


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = nn.Sequential()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.short(x))


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.layers = nn.Sequential(Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2), Block(64, 64, 1))
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = self.layers(self.stem(x))
        logits = self.fc(nn.functional.adaptive_avg_pool2d(x, 1).flatten(1))
        return logits if self.training else torch.softmax(logits, dim=1)


torch.manual_seed(0)
model = ResNet()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
compiled = torch.compile(model, backend=my_backend)
x, y = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
for step in range(3):
    loss = nn.functional.cross_entropy(compiled(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step}: loss {loss.item():.4f}")
model.eval()
with torch.no_grad():
    print("eval accuracy:", (compiled(x).argmax(1) == y).float().mean().item())

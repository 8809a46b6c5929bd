"""
issue: https://github.com/pytorch/pytorch/issues/168236
title: [compiler] NotImplementedError: View operation during in-place mutation with torch.compile
kind: crash
category: backend_failure
stage: aot_autograd
culprit: aten.mul_ under no_grad on nn.Parameter(a), which shares storage with the view x (a non-differentiable view input mutation)
fails_on: torch 2.13.0+cpu: AssertionError: aot_autograd() does not yet handle non-differentiable view input mutations (the issue reports a LoweringException on aten.set_ from a later stage)
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

class TestModel(nn.Module):

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, kernel_size=3, padding=1)
        self.fc1 = nn.Linear(64 * 14 * 14, 128)
        self.fc2 = nn.Linear(128, 10)
        self.loss_fn = nn.CrossEntropyLoss()

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = F.max_pool2d(x, kernel_size=2)
        x = self.conv2(x)
        x = F.sigmoid(x)
        x = x.view(x.size(0), -1)
        a = x
        param1 = nn.Parameter(a)
        with torch.no_grad():
            param1.mul_(1.08547576921852)
        b = torch.cat([x, x], dim=1)
        param2 = nn.Parameter(b)
        c = torch.zeros_like(x)
        c = c + x
        param3 = nn.Parameter(c)
        y = torch.randint(0, 10, (x.size(0),), dtype=torch.long)
        loss = self.loss_fn(x, y)
        return (loss, param1, param2, param3)

torch.manual_seed(0)
model = TestModel()
x = torch.randn(2, 1, 28, 28)
model(x)
torch.compile(model)(x)

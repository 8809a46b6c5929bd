"""Two compiled functions called 7 and 3 times; the first recompiles once for a new shape."""
import torch
f = torch.compile(lambda x: x * 2, backend="eager")
g = torch.compile(lambda x: torch.sin(x))
for i in range(7): f(torch.ones(3))
for i in range(3): g(torch.ones(3))
f(torch.ones(4, 4))

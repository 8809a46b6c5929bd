import torch


def picky_backend(gm, example_inputs):
    for node in gm.graph.nodes:
        if node.target is torch.sigmoid:
            raise NotImplementedError("picky_backend cannot compile sigmoid")
    return gm.forward


def head(x):
    return torch.sigmoid(x) * 3


def body(x):
    return x.cos() + x.sin()


compiled_body = torch.compile(body, backend=picky_backend)
compiled_head = torch.compile(head, backend=picky_backend)
x = torch.randn(8)
for _ in range(3):
    y = compiled_head(compiled_body(x))
torch.testing.assert_close(y, head(body(x)))
print("ok")

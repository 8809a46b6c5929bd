import torch


def picky_backend(gm, example_inputs):
    # this backend cannot compile code written on a line marked `# slow path`
    for node in gm.graph.nodes:
        if "# slow path" in (node.meta.get("stack_trace") or ""):
            raise NotImplementedError("picky_backend cannot compile a slow path")
    return gm.forward


def helper(x):
    return x.cos() + 1


def f(x):
    y = helper(x)
    z = y.sin() * 2  # slow path
    return z - y


x = torch.randn(8)
print(torch.compile(f, backend=picky_backend)(x).sum())
print(helper(x).sum())

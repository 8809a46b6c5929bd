import torch


def backend(gm, example_inputs):
    def run(*args):
        raise RuntimeError("planted: the compiled graph fails as it runs")

    return run


torch.compile(lambda x: x.sin() + 1, backend=backend)(torch.randn(3))

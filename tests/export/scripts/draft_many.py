"""Three issues torch.export.draft_export reports in one pass, exported twice (one report, two calls):
a branch on .item() (line 17), a guard on an unbacked size (line 21), a custom op with no fake kernel."""
import torch


@torch.library.custom_op("pt2doctor_test::scale", mutates_args=())
def scale(x: torch.Tensor) -> torch.Tensor:
    return x * 2
# no torch.library.register_fake for it: export cannot tell its output's shape


class Model(torch.nn.Module):
    def forward(self, x):
        total = x.sum().item()
        y = x * 2
        # a branch on a value read from a tensor
        if total > 2:
            y = y + 1
        n = x.nonzero().shape[0]
        # a branch on a size only known when the program runs
        if n > 1:
            y = y * 3
        return scale(y)


x = torch.ones(4)
for _ in range(2):
    try:
        ep = torch.export.export(Model(), (x,))
    except Exception as e:
        print("export failed:", type(e).__name__)

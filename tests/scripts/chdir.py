import os
import tempfile

import torch

os.chdir(tempfile.gettempdir())  # the script moves away from where pt2doctor was started
print(torch.compile(lambda x: x.sin() + 1, backend="eager")(torch.randn(3)))

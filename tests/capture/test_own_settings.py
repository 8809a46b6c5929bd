"""What pt2doctor sets in torch's config for itself is not quoted as the user's config (issue.md)."""

import torch._functorch.config as functorch_config

from pt2doctor.capture import torch_compat


def test_the_recorders_own_cache_setting_is_not_in_the_config_diff():
    key = "torch._functorch.config.enable_autograd_cache"
    restore = torch_compat.disable_aot_autograd_cache()
    try:
        assert functorch_config.enable_autograd_cache is False
        assert key not in torch_compat.config_diff()
    finally:
        restore()
    with functorch_config.patch(enable_autograd_cache=not functorch_config.enable_autograd_cache):
        assert key in torch_compat.config_diff()  # the same key, set by the user, is reported


# A graph compiled by a plain run, then again by an interpreter where pt2doctor's `autotune_anew` ran: the second must
# read what the first cached (every whole-program run of a diagnosis is such an interpreter, after the user's runs).
COMPILE_TWICE = """
import sys
import torch
from torch._dynamo.utils import counters
if sys.argv[1] == "anew":
    from pt2doctor.capture import torch_compat
    torch_compat.autotune_anew()
torch.compile(lambda x: (x.sin() * 2).sum(1))(torch.randn(4, 8))
print(counters["inductor"]["fxgraph_cache_hit"], counters["inductor"]["fxgraph_cache_miss"])
"""


def test_autotuning_anew_keeps_the_users_cached_graphs(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), "TORCHINDUCTOR_FX_GRAPH_CACHE": "1"}

    def compile_in_a_new_interpreter(mode: str) -> tuple[int, int]:
        out = subprocess.run([sys.executable, "-c", COMPILE_TWICE, mode], env=env, capture_output=True, text=True,
                             check=True, timeout=300)
        hits, misses = out.stdout.split()[-2:]
        return int(hits), int(misses)

    assert compile_in_a_new_interpreter("plain") == (0, 1)
    assert compile_in_a_new_interpreter("anew") == (1, 0)


def test_the_autotuning_caches_a_later_run_turns_off_are_not_in_a_recorded_graphs_config_lines():
    """A diagnosis's runs after the first autotune anew (`autotune_anew_as_own`): a graph they record must not carry
    those settings into the user's repro.py as the program's (arange_int64's repro had four such lines)."""
    import torch._inductor.config as inductor_config

    from pt2doctor.capture.torch_compat.observe import OWN_SETTINGS

    saved, own = inductor_config.get_config_copy(), set(OWN_SETTINGS)
    try:
        torch_compat.autotune_anew_as_own()
        assert not any("autotune" in line for line in torch_compat.config_lines())
        assert not any("autotune" in key for key in torch_compat.config_diff())
        inductor_config.max_autotune = True  # the program's own setting stays
        assert "torch._inductor.config.max_autotune = True" in torch_compat.config_lines()
        with inductor_config.patch(deterministic=inductor_config.deterministic):  # torch's own patch, to its value
            assert not any("deterministic" in line for line in torch_compat.config_lines())
    finally:
        inductor_config.load_config(saved)
        OWN_SETTINGS.clear()
        OWN_SETTINGS.update(own)

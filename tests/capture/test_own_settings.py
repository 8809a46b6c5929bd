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
